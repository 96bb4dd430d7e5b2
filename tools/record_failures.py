"""Record how real engines fail to start on the CPU: SGLang from `.venv-sglang`, vLLM and `transformers serve`
from `.venv-engine`.

Each case is one real launch of the engine's server serving the tiny model (`make demo` builds it) with one thing
wrong: a flag, an environment variable, or a copy of the model folder with one file broken. The log (stdout and
stderr merged, as firstlight keeps it) is written as it came; index.jsonl gets the command, the exit code and the
time to exit. The category and the root-cause line are a person's reading of the log, added to index.jsonl by
hand afterwards: this script never asks firstlight, so the test data cannot agree with the diagnosis by
construction. tests/data/failures/sglang/ and transformers/, and the 2026-12-03 logs in vllm-cpu/, were recorded
with it.

Usage: .venv/bin/python tools/record_failures.py ENGINE OUT_DIR [CASE ...]     (ENGINE: sglang, vllm, transformers)
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path

from safetensors.numpy import load_file, save_file

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "models" / "tiny-llama"
SCRATCH = Path("/tmp/firstlight-record")
PORT = 30391
HOST_NOTE = "2-core Debian 12 CPU machine"


@dataclass(frozen=True)
class Engine:
    python: Path
    entry: list[str]  # what follows the interpreter, before the arguments
    model_flag: str | None  # None: the model is the first positional argument
    args: list[tuple[str, str | None]]  # every launch's own flags (None: one that stands alone); a case's replace them
    env: dict[str, str]
    ready: bytes  # a line that says the server came up: the case is not a failure
    version: str


# Without the stand-in: the same interpreter with the stand-in's folder taken off its path before SGLang loads.
NO_STANDIN = (
    "import runpy, sys; sys.path[:] = [p for p in sys.path if not p.endswith('sglang_cpu/kernel')]; "
    "sys.argv[0] = 'sglang.launch_server'; runpy.run_module('sglang.launch_server', run_name='__main__')"
)

ENGINES = {
    "sglang": Engine(
        python=ROOT / ".venv-sglang" / "bin" / "python",
        entry=["-m", "sglang.launch_server"],
        model_flag="--model-path",
        args=[("--device", "cpu"), ("--host", "127.0.0.1"), ("--port", str(PORT)), ("--max-total-tokens", "16384")],
        env={"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"},
        ready=b"The server is fired up and ready to roll",
        version="sglang 0.5.23 with torch 2.13.0+cpu (.venv-sglang)",
    ),
    "vllm": Engine(
        python=ROOT / ".venv-engine" / "bin" / "python",
        entry=["-m", "vllm.entrypoints.openai.api_server"],
        model_flag="--model",
        args=[
            ("--host", "127.0.0.1"),
            ("--port", str(PORT)),
            ("--dtype", "float32"),
            ("--max-model-len", "2048"),
            ("--enforce-eager", None),
        ],
        env={"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"},
        ready=b"Application startup complete",
        version="vllm-cpu 0.32.0 with torch 2.13.0+cpu (.venv-engine)",
    ),
    "transformers": Engine(
        python=ROOT / ".venv-engine" / "bin" / "transformers",  # the console script: `transformers serve MODEL`
        entry=["serve"],
        model_flag=None,
        args=[("--host", "127.0.0.1"), ("--port", str(PORT))],
        env={"HF_HUB_OFFLINE": "1"},
        ready=b"Application startup complete",
        version="transformers 5.19.0 with torch 2.13.0+cpu (.venv-engine)",
    ),
}


@dataclass
class Case:
    name: str
    args: list[str]
    env: dict[str, str | None] = field(default_factory=dict)  # None removes a variable
    model: Callable[[], Path] | str = str(MODEL)
    setup: Callable[[], object] = nullcontext
    entry: list[str] | None = None  # another way in than the engine's own
    limits: dict[int, int] = field(default_factory=dict)  # resource.RLIMIT_* -> the soft and hard limit


@contextmanager
def port_taken() -> Iterator[None]:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", PORT))
        s.listen()
        yield


def _copy_of_model(name: str, skip: tuple[str, ...] = ()) -> Path:
    path = SCRATCH / name
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    for item in MODEL.iterdir():
        if item.is_file() and item.name not in skip and not item.name.startswith("."):
            shutil.copy(item, path / item.name)
    return path


def _edit_config(path: Path, **changes: object) -> Path:
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def no_config() -> Path:
    return _copy_of_model("no-config", skip=("config.json", "model.safetensors", "generation_config.json"))


def truncated_weights() -> Path:
    path = _copy_of_model("truncated", skip=("model.safetensors",))  # written here, cut short
    weights = (MODEL / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    return path


def unknown_architecture() -> Path:
    return _edit_config(_copy_of_model("unknown-arch"), architectures=["NovaForCausalLM"], model_type="nova")


def remote_code_architecture() -> Path:
    path = _copy_of_model("remote-code")
    auto_map = {"AutoConfig": "configuration_nova.NovaConfig", "AutoModelForCausalLM": "modeling_nova.NovaForCausalLM"}
    (path / "configuration_nova.py").write_text(
        "from transformers import LlamaConfig\n\n\nclass NovaConfig(LlamaConfig):\n    model_type = 'nova'\n"
    )
    return _edit_config(path, architectures=["NovaForCausalLM"], model_type="nova", auto_map=auto_map)


def broken_config_json() -> Path:
    path = _copy_of_model("broken-json")
    text = (path / "config.json").read_text()
    (path / "config.json").write_text(text[: len(text) // 2])  # as a copy cut short leaves it
    return path


def more_layers_than_weights() -> Path:
    return _edit_config(_copy_of_model("more-layers"), num_hidden_layers=4)


def wrong_hidden_size() -> Path:
    return _edit_config(_copy_of_model("wrong-hidden"), hidden_size=512, head_dim=128)


def unknown_quantization_method() -> Path:
    return _edit_config(_copy_of_model("unknown-quant"), quantization_config={"quant_method": "nova_q", "bits": 4})


def compressed_tensors_not_packed() -> Path:
    """A compressed-tensors config for 4-bit packed weights over a checkpoint whose weights are plain."""
    weights = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}
    quantization = {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights}},
        "ignore": ["lm_head"],
    }
    return _edit_config(_copy_of_model("compressed-unpacked"), quantization_config=quantization)


def yarn_without_factor() -> Path:
    rope = {"rope_type": "yarn", "rope_theta": 10000.0}
    return _edit_config(_copy_of_model("yarn-no-factor"), rope_parameters=rope, rope_scaling=rope)


def vocab_larger_than_checkpoint() -> Path:
    return _edit_config(_copy_of_model("vocab-larger"), vocab_size=32000)


def safetensors_header_length_corrupt() -> Path:
    """The first eight bytes (the header's length) overwritten, as a bad disk or a bad copy leaves them."""
    path = _copy_of_model("header-corrupt", skip=("model.safetensors",))  # written here, its header broken
    weights = bytearray((MODEL / "model.safetensors").read_bytes())
    weights[:8] = (2**40).to_bytes(8, "little")
    (path / "model.safetensors").write_bytes(bytes(weights))
    return path


def no_tokenizer() -> Path:
    return _copy_of_model("no-tokenizer", skip=("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"))


def sharded_index_without_shard() -> Path:
    path = _copy_of_model("missing-shard", skip=("model.safetensors",))
    names = load_file(str(MODEL / "model.safetensors"))
    half = sorted(names)[: len(names) // 2]
    shards = {n: "model-00001-of-00002.safetensors" for n in half}
    shards |= {n: "model-00002-of-00002.safetensors" for n in names if n not in shards}
    save_file({n: names[n] for n in half}, str(path / "model-00001-of-00002.safetensors"), metadata={"format": "pt"})
    index = {"metadata": {"total_size": 0}, "weight_map": shards}
    (path / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
    return path


# The same launch for every engine: a model folder with one thing wrong, the port taken, a host's limits
SHARED_CASES = [
    Case("missing-model-path", [], model=str(SCRATCH / "does-not-exist")),
    Case("model-dir-without-config", [], model=no_config),
    Case("truncated-weights", [], model=truncated_weights),
    Case("port-in-use", [], setup=port_taken),
    Case("unknown-architecture", [], model=unknown_architecture),
    Case("architecture-needs-remote-code", [], model=remote_code_architecture),
    Case("config-json-cut-short", [], model=broken_config_json),
    Case("config-more-layers-than-checkpoint", [], model=more_layers_than_weights),
    Case("config-hidden-size-not-checkpoints", [], model=wrong_hidden_size),
    Case("config-vocab-larger-than-checkpoint", [], model=vocab_larger_than_checkpoint),
    Case("model-dir-without-tokenizer", [], model=no_tokenizer),
    Case("index-names-a-missing-shard", [], model=sharded_index_without_shard),
    Case("hub-id-while-offline", [], model="meta-llama/Llama-3.1-8B-Instruct"),
    Case("unknown-quantization-method-in-config", [], model=unknown_quantization_method),
    Case("compressed-tensors-config-over-plain-weights", [], model=compressed_tensors_not_packed),
    Case("yarn-rope-without-factor", [], model=yarn_without_factor),
    Case("safetensors-header-length-corrupt", [], model=safetensors_header_length_corrupt),
    Case("open-files-limit-64", [], limits={resource.RLIMIT_NOFILE: 64}),
    Case("address-space-limit-3g", [], limits={resource.RLIMIT_AS: 3 * 2**30}),
]


def shared_cases(*taken: str) -> list[Case]:
    """The shared cases, less those the engine takes without failing (it comes up: nothing to record)."""
    return [case for case in SHARED_CASES if case.name not in taken]


SGLANG_CASES = [
    *shared_cases("config-more-layers-than-checkpoint"),  # SGLang keeps the layers the checkpoint lacks as made
    Case("unknown-argument", ["--max-num-seqs", "8"]),
    Case("context-length-beyond-model", ["--context-length", "65536"]),
    Case("max-total-tokens-beyond-memory", ["--max-total-tokens", "4000000000"]),
    Case("tp2-on-one-device", ["--tp-size", "2"]),
    Case("no-cpu-engine-env", [], env={"SGLANG_USE_CPU_ENGINE": None}),
    Case("no-kernel-standin", [], entry=["-c", NO_STANDIN]),
    Case("attention-backend-fa3-on-cpu", ["--attention-backend", "fa3"]),
    Case("quantization-fp8-on-cpu", ["--quantization", "fp8"]),
    # (NGRAM gets past start-up and then needs a speculative kernel the stand-in does not have: not SGLang's
    # own failure, so not recorded)
    Case(
        "speculative-eagle-on-cpu", ["--speculative-algorithm", "EAGLE", "--speculative-draft-model-path", str(MODEL)]
    ),
    Case("chat-template-path-missing", ["--chat-template", str(SCRATCH / "no-such-template.jinja")]),
    Case("lora-path-missing", ["--enable-lora", "--lora-paths", f"adapter={SCRATCH / 'no-such-adapter'}"]),
    Case("awq-on-unquantized-checkpoint", ["--quantization", "awq"]),
    Case("tp3-heads-not-divisible", ["--tp-size", "3"]),
    Case("tokenizer-path-missing", ["--tokenizer-path", str(SCRATCH / "no-such-tokenizer")]),
    Case("dp2-on-cpu", ["--dp-size", "2"]),
    Case("attention-backend-flashinfer-on-cpu", ["--attention-backend", "flashinfer"]),
    Case("kv-cache-dtype-fp8-on-cpu", ["--kv-cache-dtype", "fp8_e4m3"]),
    # (a checkpoint without one of its tensors and --mem-fraction-static 1.5 come up: not recorded)
]

VLLM_CASES = [
    *shared_cases(),
    Case("unknown-argument", ["--max-total-tokens", "16384"]),
    Case("max-model-len-beyond-model", ["--max-model-len", "65536"]),
    Case("batched-tokens-below-model-len", ["--max-num-batched-tokens", "512", "--no-enable-chunked-prefill"]),
    Case("tp3-heads-not-divisible", ["--tensor-parallel-size", "3"]),
    Case("quantization-fp8-on-cpu", ["--quantization", "fp8"]),
    Case("awq-on-unquantized-checkpoint", ["--quantization", "awq"]),
    Case(
        "speculative-eagle3-draft-missing",
        [
            "--speculative-config",
            json.dumps({"method": "eagle3", "model": str(SCRATCH / "no-such-draft"), "num_speculative_tokens": 3}),
        ],
    ),
    Case("speculative-config-not-json", ["--speculative-config", "{method: ngram, num_speculative_tokens: 3"]),
    Case("gpu-memory-utilization-above-one", ["--gpu-memory-utilization", "1.5"]),
    Case("chat-template-path-missing", ["--chat-template", str(SCRATCH / "no-such-template.jinja")]),
    Case("lora-path-missing", ["--enable-lora", "--lora-modules", f"adapter={SCRATCH / 'no-such-adapter'}"]),
    Case("hf-overrides-not-json", ["--hf-overrides", "{rope_scaling: yarn"]),
    Case("kv-cache-space-not-a-number", [], env={"VLLM_CPU_KVCACHE_SPACE": "4GB"}),
    Case("tokenizer-path-missing", ["--tokenizer", str(SCRATCH / "no-such-tokenizer")]),
    Case("generation-config-folder-missing", ["--generation-config", str(SCRATCH / "no-such-folder")]),
    Case("max-num-seqs-zero", ["--max-num-seqs", "0"]),
    Case("load-format-gguf-on-safetensors", ["--load-format", "gguf"]),
    Case("pipeline-parallel-2-on-cpu", ["--pipeline-parallel-size", "2"]),
    Case("speculative-ngram-without-token-count", ["--speculative-config", '{"method": "ngram"}']),
    Case(
        "speculative-eagle3-draft-not-an-eagle-head",
        ["--speculative-config", json.dumps({"method": "eagle3", "model": str(MODEL), "num_speculative_tokens": 3})],
    ),
    Case("attention-backend-unknown", ["--attention-backend", "NOVA_ATTN"]),
    Case("tokenizer-mode-mistral-on-llama", ["--tokenizer-mode", "mistral"]),
    # (a checkpoint without one tensor, --attention-backend FLASHINFER and --kv-cache-dtype fp8_e4m3 on the CPU and
    # a 1 MiB --kv-cache-memory-bytes come up: vLLM 0.32 on the CPU takes them; not recorded)
]

TRANSFORMERS_CASES = [
    # transformers serve ignores a quantization method it does not know, and the tiny model fits in 3 GiB
    *shared_cases("unknown-quantization-method-in-config", "address-space-limit-3g"),
    Case("unknown-argument", ["--max-model-len", "2048"]),
    Case("attn-implementation-flash-attention-2", ["--attn-implementation", "flash_attention_2"]),
    Case("quantization-bnb-4bit-on-cpu", ["--quantization", "bnb-4bit"]),
]

CASES = {"sglang": SGLANG_CASES, "vllm": VLLM_CASES, "transformers": TRANSFORMERS_CASES}


def launch_argv(engine: Engine, case: Case) -> list[str]:
    model = case.model() if callable(case.model) else case.model
    own = {flag for flag in case.args if flag.startswith("--")}
    base = [part for flag, value in engine.args if flag not in own for part in (flag, value) if part is not None]
    model_args = [str(model)] if engine.model_flag is None else [engine.model_flag, str(model)]
    return [str(engine.python), *(case.entry or engine.entry), *model_args, *base, *case.args]


def record(engine_name: str, case: Case, out: Path, timeout: float = 240) -> dict[str, object]:
    engine = ENGINES[engine_name]
    argv = launch_argv(engine, case)
    env = {**os.environ, **engine.env}
    for key, value in case.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    log = out / f"{case.name}.log"
    started = time.monotonic()
    with case.setup(), open(log, "wb") as f:
        proc = subprocess.Popen(
            argv, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True, preexec_fn=_limited(case.limits)
        )
        code = _wait(proc, log, engine.ready, timeout)
        _reap_group(proc.pid)
    variables = {**engine.env, **case.env}
    return {
        "file": log.name,
        "category": "",
        "root_cause_line": "",
        "exit_code": code,
        "seconds_to_exit": round(time.monotonic() - started, 1),
        "how": " ".join(
            [*(f"{k}={v}" if v is not None else f"(no {k})" for k, v in variables.items()), *_program(argv)]
        ).replace(str(ROOT) + "/", ""),
        "recorded": f"{time.strftime('%Y-%m-%d')}, {engine.version}, {HOST_NOTE}",
    }


def _program(argv: list[str]) -> list[str]:
    """The command as a person types it: `-m module ...` after the interpreter, a console script by its name."""
    program = Path(argv[0]).name
    return argv[1:] if program.startswith("python") else [program, *argv[1:]]


def _limited(limits: dict[int, int]) -> Callable[[], None] | None:
    """What the child runs before the engine: the case's resource limits (a host's `ulimit`)."""
    if not limits:
        return None

    def apply() -> None:
        for which, value in limits.items():
            resource.setrlimit(which, (value, value))

    return apply


def _wait(proc: subprocess.Popen[bytes], log: Path, ready: bytes, timeout: float) -> int | str:
    """The exit code; or what happened instead (a case the engine accepts comes up and is stopped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            return code
        if ready in log.read_bytes():
            # uvicorn says its application started before it binds the port: a moment for the bind to fail
            with suppress(subprocess.TimeoutExpired):
                return proc.wait(timeout=5)
            return "came up: not a failure"
        time.sleep(0.5)
    return f"still running after {timeout:.0f} s: stopped"


def _reap_group(pgid: int) -> None:
    """An engine leaves its workers behind when the main process dies first."""
    with suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def main(engine: str, out_dir: str, names: list[str]) -> int:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for case in CASES[engine]:
        if names and case.name not in names:
            continue
        row = record(engine, case, out)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
