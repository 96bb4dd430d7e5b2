"""SGLang (`python -m sglang.launch_server`). Log strings: reference/engine-anchors.md §1.2.

Both wordings are listed: 0.5.23's "Init parallel begin." and "Capture target decode CUDA graph
begin", and the older "Init torch distributed begin." and "Capture cuda graph begin.".
"""

from __future__ import annotations

import re

from firstlight.deployment import Deployment
from firstlight.engines.base import EngineAdapter, compile_all, extra_args
from firstlight.launch.phases import phase_rules, progress_rules


def build_argv(dep: Deployment) -> list[str]:
    argv = [
        str(dep.python),
        "-m",
        "sglang.launch_server",
        "--model-path",
        str(dep.model),
        "--served-model-name",
        dep.served_model_name,
        "--host",
        dep.host,
        "--port",
        str(dep.port),
    ]
    par = dep.parallel
    for flag, value in (
        ("--tp-size", par.tp),
        ("--pp-size", par.pp),
        ("--dp-size", par.dp),
        ("--ep-size", par.ep),
    ):
        if value > 1:
            argv += [flag, str(value)]
    return argv + extra_args(dep.args)


SGLANG = EngineAdapter(
    name="sglang",
    build_argv=build_argv,
    phases=phase_rules(
        ("distributed_init", r"Init (torch distributed|parallel) begin|sglang is using nccl=="),
        (
            "weights_loading",
            r"Load weight begin\.|Loading safetensors checkpoint shards|Multi-thread loading shards",
        ),
        ("weights_loaded", r"Load weight end\."),
        ("kv_cache_allocated", r"KV Cache is allocated\.|Memory pool end\."),
        ("cuda_graph_capture", r"Capture .*(cuda|CUDA) graph begin"),
        ("cuda_graph_done", r"Capture .*(cuda|CUDA) graph end|max_total_num_tokens=\d+"),
        ("http_listening", r"Uvicorn running on |Application startup complete\."),
        ("warmup_done", r"\"POST /generate HTTP/1\.1\" 200"),
    ),
    progress=progress_rules(
        (
            "weights_loading",
            r"(?:Loading (?:safetensors|pt) checkpoint shards|Multi-thread loading shards|"
            r"Loading safetensors using [\w ]+):\s+\d+% Completed \| (?P<done>\d+)/(?P<total>\d+)",
            "shards",
        ),
        (
            "cuda_graph_capture",
            r"Capturing (?:batches|num tokens) \((?P<detail>[^)]*)\):\s+\d+%.*?\|\s*"
            r"(?P<done>\d+)/(?P<total>\d+)",
            "graphs",
        ),
    ),
    ready_line=re.compile(r"The server is fired up and ready to roll"),
    fatal_lines=compile_all(
        r"Scheduler hit an exception",
        r"Received sigquit from a child process",
        r"scheduler (is dead|died during initialization)",
        r"Initialization failed\. (Please see|warmup error)",
        r"Subprocess \S+ \(pid=\d+\) crashed with exit code",
    ),
    fingerprints=compile_all(
        r"\bsglang[./:]",
        r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d+)?( DP\d+)?( PP\d+)?( TP\d+)",
        r"Scheduler hit an exception",
        r"The server is fired up",
        r"sgl[_-]kernel",
    ),
    default_env={"HF_HUB_OFFLINE": "1"},
)
