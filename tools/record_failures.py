"""Record how real engines fail to start on the CPU: SGLang from `.venv-sglang`, vLLM and `transformers serve`
from `.venv-engine`, `llama-server` from `make llama`; and users' own scripts on vLLM's `LLM()`, SGLang's
`sgl.Engine()` and transformers' `from_pretrained`, as issue reports show them. (record_gpu_failures.py does the same
on a GPU.)

Each case is one real launch of the engine's server (or a script) serving the tiny model (`make demo` builds it;
`make llama` the GGUF) with one thing wrong: a flag or a script's keyword, an environment variable, a file named like
the package in the working directory, or a copy of the model folder with one file broken. The log (stdout and
stderr merged, as firstlight keeps it) is written as it came; index.jsonl gets the command, the exit code and the
time to exit. The category and the root-cause line are a person's reading of the log, added to index.jsonl by
hand afterwards: this script never asks firstlight, so the test data cannot agree with the diagnosis by
construction. tests/data/failures/sglang/, transformers/ and scripts/, the 2026-12-03 logs in vllm-cpu/ and in
llama-server/, were recorded with it.

Usage: .venv/bin/python tools/record_failures.py ENGINE OUT_DIR [CASE ...]
ENGINE: sglang, vllm, transformers, vllm-serve, vllm-llm, sglang-engine, transformers-script, llama-server
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
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
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
    ready: bytes | None  # a line that says the server came up: the case is not a failure (None: a script's exit 0)
    version: str
    keywords: bool = False  # a script: the model and the arguments go in as one JSON object of keyword arguments
    model: Path = MODEL  # what a case serves unless it brings its own


# Without the stand-in: the same interpreter with the stand-in's folder taken off its path before SGLang loads.
NO_STANDIN = (
    "import runpy, sys; sys.path[:] = [p for p in sys.path if not p.endswith('sglang_cpu/kernel')]; "
    "sys.argv[0] = 'sglang.launch_server'; runpy.run_module('sglang.launch_server', run_name='__main__')"
)

# A user's own script, as issue reports show them: the engine's Python API, keyword arguments from argv[1].
VLLM_SCRIPT = (
    "import json, sys\nfrom vllm import LLM, SamplingParams\n\nllm = LLM(**json.loads(sys.argv[1]))\n"
    "out = llm.generate(['Hello, my name is'], SamplingParams(max_tokens=8))\nprint(out[0].outputs[0].text)\n"
)
SGLANG_SCRIPT = (
    "import json, sys\nimport sglang as sgl\n\nif __name__ == '__main__':\n"
    "    llm = sgl.Engine(**json.loads(sys.argv[1]))\n"
    "    print(llm.generate('Hello, my name is', {'max_new_tokens': 8})['text'])\n    llm.shutdown()\n"
)
TRANSFORMERS_SCRIPT = (
    "import json, sys\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
    "kwargs = json.loads(sys.argv[1])\npath = kwargs.pop('model')\n"
    "tokenizer = AutoTokenizer.from_pretrained(path)\nmodel = AutoModelForCausalLM.from_pretrained(path, **kwargs)\n"
    "ids = tokenizer('Hello, my name is', return_tensors='pt').to(model.device)\n"
    "print(tokenizer.decode(model.generate(**ids, max_new_tokens=8)[0]))\n"
)

# vLLM's own flags and environment for every way in (`python -m ...api_server`, `vllm serve`)
VLLM_ARGS: list[tuple[str, str | None]] = [
    ("--host", "127.0.0.1"),
    ("--port", str(PORT)),
    ("--dtype", "float32"),
    ("--max-model-len", "2048"),
    ("--enforce-eager", None),
]
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
VLLM_VERSION = "vllm-cpu 0.32.0 with torch 2.13.0+cpu (.venv-engine)"

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
        args=VLLM_ARGS,
        env=VLLM_ENV,
        ready=b"Application startup complete",
        version=VLLM_VERSION,
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
    "vllm-serve": Engine(
        python=ROOT / ".venv-engine" / "bin" / "vllm",  # the console script: `vllm serve MODEL`
        entry=["serve"],
        model_flag=None,
        args=VLLM_ARGS,
        env=VLLM_ENV,
        ready=b"Application startup complete",
        version=VLLM_VERSION,
    ),
    "vllm-llm": Engine(
        python=ROOT / ".venv-engine" / "bin" / "python",
        entry=["-c", VLLM_SCRIPT],
        model_flag="model",
        args=[("dtype", "float32"), ("max_model_len", "2048"), ("enforce_eager", None)],
        env=VLLM_ENV,
        ready=None,
        version=f"{VLLM_VERSION}, offline LLM()",
        keywords=True,
    ),
    "sglang-engine": Engine(
        python=ROOT / ".venv-sglang" / "bin" / "python",
        entry=["-c", SGLANG_SCRIPT],
        model_flag="model_path",
        args=[("device", "cpu"), ("max_total_tokens", "16384")],
        env={"SGLANG_USE_CPU_ENGINE": "1", "HF_HUB_OFFLINE": "1"},
        ready=None,
        version="sglang 0.5.23 with torch 2.13.0+cpu (.venv-sglang), offline sgl.Engine()",
        keywords=True,
    ),
    "transformers-script": Engine(
        python=ROOT / ".venv-engine" / "bin" / "python",
        entry=["-c", TRANSFORMERS_SCRIPT],
        model_flag="model",
        args=[],
        env={"HF_HUB_OFFLINE": "1"},
        ready=None,
        version="transformers 5.19.0 with torch 2.13.0+cpu (.venv-engine), from_pretrained + generate",
        keywords=True,
    ),
    "llama-server": Engine(
        python=ROOT / "models" / "llama-server",  # `make llama` builds it
        entry=[],
        model_flag="-m",
        args=[("--host", "127.0.0.1"), ("--port", str(PORT)), ("-c", "2048"), ("-t", "2")],
        env={},
        ready=b"listening on http",
        version="llama.cpp vendored in llama-cpp-python 0.3.36 (make llama)",
        model=ROOT / "models" / "tiny-llama.gguf",
    ),
}


@dataclass
class Case:
    name: str
    args: list[str]
    env: dict[str, str | None] = field(default_factory=dict)  # None removes a variable
    model: Callable[[], Path] | str | None = None  # None: the engine's own
    setup: Callable[[], object] = nullcontext
    entry: list[str] | None = None  # another way in than the engine's own
    limits: dict[int, int] = field(default_factory=dict)  # resource.RLIMIT_* -> the soft and hard limit
    kwargs: dict[str, object] = field(default_factory=dict)  # a script's keyword arguments (None: left out)
    timeout: float = 240  # stopped after this long: a launch that hangs is recorded as one


def taken(port: int) -> Callable[[], AbstractContextManager[None]]:
    """Another process listening on `port` meanwhile."""

    @contextmanager
    def listening() -> Iterator[None]:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", port))
            s.listen()
            yield

    return listening


port_taken = taken(PORT)


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


def _cut_in_half(path: Path, name: str) -> Path:
    text = (path / name).read_text()
    (path / name).write_text(text[: len(text) // 2])
    return path


def broken_config_json() -> Path:
    return _cut_in_half(_copy_of_model("broken-json"), "config.json")  # as a copy cut short leaves it


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


def tokenizer_json_cut_short() -> Path:
    return _cut_in_half(_copy_of_model("tokenizer-cut"), "tokenizer.json")


def tokenizer_config_cut_short() -> Path:
    return _cut_in_half(_copy_of_model("tokenizer-config-cut"), "tokenizer_config.json")


def generation_config_cut_short() -> Path:
    return _cut_in_half(_copy_of_model("generation-config-cut"), "generation_config.json")


def kv_heads_not_dividing_heads() -> Path:
    return _edit_config(_copy_of_model("kv-heads-3"), num_key_value_heads=3)


def empty_weights() -> Path:
    path = _copy_of_model("empty-weights", skip=("model.safetensors",))
    (path / "model.safetensors").write_bytes(b"")  # as a download that never started leaves it
    return path


def pytorch_bin_garbage() -> Path:
    """Weights only as pytorch_model.bin, and that file not a checkpoint (an HTML error page saved under its name)."""
    path = _copy_of_model("bin-garbage", skip=("model.safetensors",))
    (path / "pytorch_model.bin").write_text("<!DOCTYPE html><html><body>Access denied</body></html>\n")
    return path


def unknown_dtype_in_config() -> Path:
    return _edit_config(_copy_of_model("dtype-unknown"), dtype="float8", torch_dtype="float8")


def config_without_model_type() -> Path:
    path = _copy_of_model("no-model-type")
    config = json.loads((path / "config.json").read_text())
    for key in ("model_type", "architectures"):
        config.pop(key)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def unknown_rope_type() -> Path:
    rope = {"rope_type": "nova", "rope_theta": 10000.0, "factor": 4.0}
    return _edit_config(_copy_of_model("rope-type-unknown"), rope_parameters=rope, rope_scaling=rope)


def chat_template_syntax_error() -> Path:
    path = _copy_of_model("template-syntax")
    (path / "chat_template.jinja").write_text("{% for message in messages %}{{ message['content'] }}{% endfo %}\n")
    return path


def claims_quantization(method: str, **fields: object) -> Callable[[], Path]:
    """The tiny model's folder with a quantization config of a real method over its plain weights: a checkpoint made
    for another engine, GPU or library, as its config.json announces it."""

    def make() -> Path:
        config = {"quant_method": method, **fields}
        return _edit_config(_copy_of_model(f"quant-{method}"), quantization_config=config)

    return make


BUILD_ARCHITECTURE = (
    "import json, sys\nfrom transformers import AutoConfig, AutoModel, AutoModelForCausalLM\n"
    "config = AutoConfig.for_model(sys.argv[1], **json.loads(sys.argv[2]))\n"
    "try:\n    model = AutoModelForCausalLM.from_config(config)\nexcept ValueError:\n"
    "    model = AutoModel.from_config(config)\nmodel.save_pretrained(sys.argv[3])\n"
)


def of_architecture(model_type: str, **dims: object) -> Callable[[], Path]:
    """A tiny randomly initialised model of another architecture (transformers builds it in the engine's
    environment) with the tiny model's tokenizer and its vocabulary size: a model the engine may not implement."""

    def make() -> Path:
        path = SCRATCH / f"arch-{model_type}"
        if not (path / "config.json").exists():
            python = ROOT / ".venv-engine" / "bin" / "python"
            sizes = json.dumps({"vocab_size": json.loads((MODEL / "config.json").read_text())["vocab_size"], **dims})
            subprocess.run([python, "-c", BUILD_ARCHITECTURE, model_type, sizes, path], check=True)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(MODEL / name, path / name)
        return path

    return make


def shadowing_module(name: str) -> Callable[[], object]:
    """A file in the working directory named like the package the script imports, as a user's scratch folder has."""

    @contextmanager
    def setup() -> Iterator[None]:
        folder = SCRATCH / f"shadow-{name}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / f"{name}.py").write_text("# my notes on trying the engine\nprint('loaded my own module')\n")
        previous = Path.cwd()
        os.chdir(folder)
        try:
            yield
        finally:
            os.chdir(previous)

    return setup


TORCH_OTHER_RELEASE = "/opt/pypi-more/files/torch-2.14.1-cp311-cp311-manylinux_2_28_x86_64.whl"  # a CUDA build


def other_release(name: str, *requirements: str, kwargs: dict[str, object] | None = None) -> Case:
    """Another release of a package the engine imports, first on its path: an environment where one package was
    upgraded or pinned by hand after the engine was installed (`pip install transformers==...`)."""
    folder = SCRATCH / "releases" / name

    @contextmanager
    def setup() -> Iterator[None]:
        if not folder.exists():
            pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--only-binary=:all:"]
            subprocess.run([*pip, "--python-version", "3.11", "--target", str(folder), *requirements], check=True)
        yield

    return Case(name, [], env={"PYTHONPATH": str(folder)}, setup=setup, kwargs=kwargs or {})


# Releases a server's environment can be left with (vLLM and SGLang both)
SERVER_RELEASES = [
    other_release("transformers-4.51-on-path", "transformers==4.51.3"),
    other_release("huggingface-hub-0.23-on-path", "huggingface_hub==0.23.5"),
    other_release("pydantic-1-on-path", "pydantic==1.10.21"),
    other_release("numpy-1.26-on-path", "numpy==1.26.4"),
    other_release("fastapi-0.95-on-path", "fastapi==0.95.2"),
    other_release("torch-2.14-cuda-on-path", TORCH_OTHER_RELEASE),
]

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
    Case("tokenizer-json-cut-short", [], model=tokenizer_json_cut_short),
    Case("tokenizer-config-cut-short", [], model=tokenizer_config_cut_short),
    Case("generation-config-cut-short", [], model=generation_config_cut_short),
    Case("config-kv-heads-not-dividing-heads", [], model=kv_heads_not_dividing_heads),
    Case("weights-file-empty", [], model=empty_weights),
    Case("weights-bin-not-a-checkpoint", [], model=pytorch_bin_garbage),
    Case("config-dtype-unknown", [], model=unknown_dtype_in_config),
    Case("config-without-model-type", [], model=config_without_model_type),
    Case("rope-type-unknown", [], model=unknown_rope_type),
    Case("chat-template-syntax-error", [], model=chat_template_syntax_error),
    # a directory no one can write (root included: /proc), as a read-only container filesystem leaves it
    Case("tmpdir-not-writable", [], env={"TMPDIR": "/proc/firstlight-tmp"}),
    Case("hf-home-not-writable", [], env={"HF_HOME": "/proc/firstlight-hf"}),
]


def shared_cases(*taken: str) -> list[Case]:
    """The shared cases, less those the engine takes without failing (it comes up: nothing to record)."""
    return [case for case in SHARED_CASES if case.name not in taken]


# A checkpoint the engine cannot take: a quantization method it does not run here, an architecture it lacks
TINY = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}
QUANTIZED_CASES = [
    Case("gptq-3-bit", [], model=claims_quantization("gptq", bits=3, group_size=128, desc_act=False, sym=True)),
    Case(
        "awq-gemv-fast",
        [],
        model=claims_quantization("awq", bits=4, group_size=128, zero_point=True, version="gemv_fast"),
    ),
    Case(
        "fp8-block-128",
        [],
        model=claims_quantization("fp8", activation_scheme="dynamic", fmt="e4m3", weight_block_size=[128, 128]),
    ),
    Case(
        "bitsandbytes-nf4", [], model=claims_quantization("bitsandbytes", load_in_4bit=True, bnb_4bit_quant_type="nf4")
    ),
    Case("mxfp4", [], model=claims_quantization("mxfp4")),
    Case("modelopt-nvfp4", [], model=claims_quantization("modelopt", quant_algo="NVFP4", group_size=16)),
    Case("hqq-4-bit", [], model=claims_quantization("hqq", nbits=4, group_size=64)),
    Case(
        "aqlm-1x16",
        [],
        model=claims_quantization("aqlm", in_group_size=8, nbits_per_codebook=16, num_codebooks=1, out_group_size=1),
    ),
    Case(
        "torchao-int4",
        [],
        model=claims_quantization(
            "torchao",
            quant_type={"default": {"_type": "Int4WeightOnlyConfig", "_version": 1, "_data": {"group_size": 128}}},
        ),
    ),
    Case("fbgemm-fp8", [], model=claims_quantization("fbgemm_fp8", activation_scale_ub=1200.0)),
    Case("auto-round-4-bit", [], model=claims_quantization("auto-round", bits=4, group_size=128, sym=True)),
    Case(
        "compressed-tensors-nvfp4",
        [],
        model=claims_quantization(
            "compressed-tensors",
            format="nvfp4-pack-quantized",
            quantization_status="compressed",
            ignore=["lm_head"],
            config_groups={
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 4,
                        "type": "float",
                        "strategy": "tensor_group",
                        "group_size": 16,
                        "symmetric": True,
                    },
                }
            },
        ),
    ),
]
ARCHITECTURE_CASES = [
    Case(
        "t5-encoder-decoder",
        [],
        model=of_architecture("t5", d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16),
    ),
    Case(
        "bart-encoder-decoder",
        [],
        model=of_architecture(
            "bart",
            d_model=64,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=128,
            decoder_ffn_dim=128,
        ),
    ),
    Case("xlnet", [], model=of_architecture("xlnet", d_model=64, n_layer=2, n_head=4, d_inner=128)),
    Case(
        "rwkv",
        [],
        model=of_architecture(
            "rwkv",
            hidden_size=64,
            num_hidden_layers=2,
            attention_hidden_size=64,
            intermediate_size=128,
        ),
    ),
    Case("mamba", [], model=of_architecture("mamba", hidden_size=64, num_hidden_layers=2, state_size=8)),
    Case("bert-encoder", [], model=of_architecture("bert", **TINY)),
    Case("ctrl", [], model=of_architecture("ctrl", n_embd=64, n_layer=2, n_head=4, dff=128)),
    Case(
        "deepseek-v3-mla-moe",
        [],
        model=of_architecture(
            "deepseek_v3",
            **TINY,
            num_key_value_heads=4,
            n_routed_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            q_lora_rank=32,
            kv_lora_rank=16,
            qk_rope_head_dim=8,
            qk_nope_head_dim=8,
            v_head_dim=16,
            first_k_dense_replace=1,
            n_group=1,
            topk_group=1,
        ),
    ),
]

# Distributed set-up going wrong: a node that never joins, an address no one answers at, a network interface or a
# port that is not there, CPU binding the host cannot give (several ranks on the CPU: gloo and shared memory)
UNREACHABLE = "10.255.255.1"
VLLM_DISTRIBUTED_CASES = [
    Case("tp2-gloo-interface-missing", ["--tensor-parallel-size", "2"], env={"GLOO_SOCKET_IFNAME": "nosuchif0"}),
    Case("tp2-host-ip-not-local", ["--tensor-parallel-size", "2"], env={"VLLM_HOST_IP": UNREACHABLE}, timeout=120),
    Case("dp2-address-unreachable", ["--data-parallel-size", "2", "--data-parallel-address", UNREACHABLE], timeout=120),
    Case("omp-threads-bind-unknown", ["--tensor-parallel-size", "2"], env={"VLLM_CPU_OMP_THREADS_BIND": "nova"}),
    Case("omp-threads-bind-cores-absent", [], env={"VLLM_CPU_OMP_THREADS_BIND": "64-127"}),
    Case(
        "tp2-second-node-never-joins",
        ["--tensor-parallel-size", "2", "--nnodes", "2", "--node-rank", "0", "--master-addr", "127.0.0.1"],
        timeout=120,
    ),
]
SGLANG_DISTRIBUTED_CASES = [
    Case("dist-init-addr-unreachable", ["--dist-init-addr", f"{UNREACHABLE}:30500"], timeout=120),
    Case(
        "second-node-never-joins",
        ["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "127.0.0.1:30500"],
        timeout=120,
    ),
    Case("dist-init-addr-unresolvable", ["--dist-init-addr", "nova-head:30500"], timeout=120),
    Case("nccl-port-taken", ["--nccl-port", str(PORT + 1)], setup=taken(PORT + 1)),
    Case("gloo-interface-missing", [], env={"GLOO_SOCKET_IFNAME": "nosuchif0"}),
    Case(
        "second-node-never-joins-dist-timeout-5",
        ["--nnodes", "2", "--node-rank", "0", "--dist-init-addr", "127.0.0.1:30500", "--dist-timeout", "5"],
        timeout=120,
    ),
]

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
    Case("tool-call-parser-unknown", ["--tool-call-parser", "nova"]),
    Case("reasoning-parser-unknown", ["--reasoning-parser", "nova"]),
    Case("grammar-backend-unknown", ["--grammar-backend", "nova"]),
    Case("load-format-unknown", ["--load-format", "nova"]),
    Case("json-model-override-not-json", ["--json-model-override-args", "{rope_scaling: yarn"]),
    Case("node-rank-beyond-nodes", ["--nnodes", "2", "--node-rank", "2", "--dist-init-addr", "127.0.0.1:30500"]),
    Case("ep-size-3", ["--ep-size", "3"]),
    Case("pp-size-2-on-cpu", ["--pp-size", "2"]),
    Case("disaggregation-prefill-without-transfer-engine", ["--disaggregation-mode", "prefill"]),
    Case("port-out-of-range", ["--port", "99999"]),
    Case("host-not-local", ["--host", "10.255.255.1"]),
    Case("kv-cache-dtype-unknown", ["--kv-cache-dtype", "nova"]),
    Case("speculative-algorithm-unknown", ["--speculative-algorithm", "NOVA"]),
    Case("max-total-tokens-16", ["--max-total-tokens", "16"]),
    Case("lora-rank-not-supported", ["--enable-lora", "--max-lora-rank", "7", "--lora-target-modules", "all"]),
    Case("chunked-prefill-size-1", ["--chunked-prefill-size", "1"]),
    Case("gguf-file-as-model", [], model=str(ROOT / "models" / "tiny-llama.gguf")),
    Case("mem-fraction-static-zero", ["--mem-fraction-static", "0"]),
    Case("tp-size-zero", ["--tp-size", "0"]),
    Case("schedule-policy-unknown", ["--schedule-policy", "nova"]),
    Case("remote-code-trusted-modeling-file-missing", ["--trust-remote-code"], model=remote_code_architecture),
    Case("attention-backend-flashinfer-on-cpu", ["--attention-backend", "flashinfer"]),
    Case("kv-cache-dtype-fp8-on-cpu", ["--kv-cache-dtype", "fp8_e4m3"]),
    *SERVER_RELEASES,
    *QUANTIZED_CASES,
    *ARCHITECTURE_CASES,
    *SGLANG_DISTRIBUTED_CASES,
    other_release("tokenizers-0.19-on-path", "tokenizers==0.19.1"),
    other_release("openai-1.3-on-path", "openai==1.3.0"),
    other_release("xgrammar-0.1-on-path", "xgrammar==0.1.10"),
    other_release("torchao-0.5-on-path", "torchao==0.5.0"),
    other_release("pyzmq-25-on-path", "pyzmq==25.1.2"),
    other_release("transformers-4.57-on-path", "transformers==4.57.1"),
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
    Case("device-cuda-on-cpu-torch", ["--device", "cuda"]),
    Case("dtype-not-a-dtype", ["--dtype", "float8"]),
    Case("attn-implementation-unknown", ["--attn-implementation", "nova"]),
    Case("quantization-bnb-8bit-on-cpu", ["--quantization", "bnb-8bit"]),
]

MISSING = str(SCRATCH / "no-such-file")
BAD_TEMPLATE = str(SCRATCH / "bad-template.jinja")


@contextmanager
def bad_template() -> Iterator[None]:
    """A chat template file with a Jinja syntax error (an `endfor` mistyped)."""
    SCRATCH.mkdir(parents=True, exist_ok=True)
    Path(BAD_TEMPLATE).write_text("{% for message in messages %}{{ message.content }}{% endfo %}\n")
    yield


# The same faults through other ways in: `vllm serve`, and a user's script on vLLM's, SGLang's and transformers' API
SPECULATIVE_MTP = {"method": "mtp", "num_speculative_tokens": 1}

VLLM_SERVE_CASES = [
    *shared_cases(),
    Case("dtype-not-a-choice", ["--dtype", "float8"]),
    Case("block-size-7", ["--block-size", "7"]),
    Case("auto-tool-choice-without-parser", ["--enable-auto-tool-choice"]),
    Case("tool-call-parser-unknown", ["--enable-auto-tool-choice", "--tool-call-parser", "nova"]),
    Case("reasoning-parser-unknown", ["--reasoning-parser", "nova"]),
    Case("executor-backend-ray-not-installed", ["--distributed-executor-backend", "ray"]),
    Case("ssl-key-file-missing", ["--ssl-keyfile", MISSING + ".key", "--ssl-certfile", MISSING + ".crt"]),
    Case("lora-rank-not-supported", ["--enable-lora", "--max-lora-rank", "7"]),
    Case("multimodal-limit-on-text-model", ["--limit-mm-per-prompt", '{"image": 2}']),
    Case("worker-class-not-importable", ["--worker-cls", "nova.workers.NovaWorker"]),
    Case("middleware-not-importable", ["--middleware", "nova.middleware.Auth"]),
    Case("max-model-len-not-a-number", ["--max-model-len", "32k tokens"]),
    Case("compilation-level-unknown", ["--compilation-config", '{"level": 9}']),
    Case("port-out-of-range", ["--port", "99999"]),
    Case("host-not-local", ["--host", "10.255.255.1"]),
    Case("logging-config-file-missing", [], env={"VLLM_LOGGING_CONFIG_PATH": MISSING + ".json"}),
    Case("kv-connector-unknown", ["--kv-transfer-config", '{"kv_connector": "NovaConnector", "kv_role": "kv_both"}']),
    *SERVER_RELEASES,
    *QUANTIZED_CASES,
    *ARCHITECTURE_CASES,
    *VLLM_DISTRIBUTED_CASES,
    other_release("tokenizers-0.19-on-path", "tokenizers==0.19.1"),
    other_release("openai-1.3-on-path", "openai==1.3.0"),
    other_release("compressed-tensors-0.9-on-path", "compressed-tensors==0.9.0"),
    other_release("mistral-common-1.0-on-path", "mistral_common==1.0.0"),
    other_release("safetensors-0.3-on-path", "safetensors==0.3.3"),
    other_release("starlette-0.27-on-path", "starlette==0.27.0"),
    other_release("transformers-4.57-on-path", "transformers==4.57.1"),
    other_release("xgrammar-0.1-on-path", "xgrammar==0.1.10"),
    other_release("pyzmq-25-on-path", "pyzmq==25.1.2"),
    other_release("msgspec-0.16-on-path", "msgspec==0.16.0"),
    other_release("gguf-0.6-on-path", "gguf==0.6.0"),
    other_release("prometheus-client-0.9-on-path", "prometheus_client==0.9.0"),
    other_release("tiktoken-0.4-on-path", "tiktoken==0.4.0"),
    Case("structured-outputs-backend-unknown", ["--structured-outputs-config", '{"backend": "nova"}']),
    Case("quantization-bitsandbytes-not-installed", ["--quantization", "bitsandbytes"]),
    Case("load-format-runai-not-installed", ["--load-format", "runai_streamer"]),
    Case("swap-space-beyond-memory", ["--swap-space", "4000"]),
    Case("gpu-blocks-override-1", ["--num-gpu-blocks-override", "1"]),
    Case("removed-flag-disable-log-requests", ["--disable-log-requests"]),
    Case("cache-root-not-writable", [], env={"VLLM_CACHE_ROOT": "/proc/firstlight-vllm"}),
    Case("plugin-not-installed", [], env={"VLLM_PLUGINS": "nova_plugin"}),
    Case("multiproc-method-unknown", [], env={"VLLM_WORKER_MULTIPROC_METHOD": "nova"}),
    Case("data-parallel-2-on-cpu", ["--data-parallel-size", "2"]),
    Case("speculative-mtp-on-model-without-mtp", ["--speculative-config", json.dumps(SPECULATIVE_MTP)]),
    Case("max-num-batched-tokens-zero", ["--max-num-batched-tokens", "0"]),
    Case("prefix-caching-hash-unknown", ["--prefix-caching-hash-algo", "nova"]),
    Case("mm-processor-kwargs-not-json", ["--mm-processor-kwargs", "{num_crops: 4"]),
    Case("gguf-file-as-model", [], model=str(ROOT / "models" / "tiny-llama.gguf")),
    Case("quantization-gguf-on-safetensors", ["--quantization", "gguf"]),
    Case("remote-code-trusted-modeling-file-missing", ["--trust-remote-code"], model=remote_code_architecture),
    Case("omp-threads-bind-beyond-cores", [], env={"VLLM_CPU_OMP_THREADS_BIND": "64-67"}),
]

SPECULATIVE_NOVA = {"speculative_config": {"method": "nova", "num_speculative_tokens": 3}}

VLLM_LLM_CASES = [
    *shared_cases(),
    Case("max-model-len-beyond-model", [], kwargs={"max_model_len": 65536}),
    Case("keyword-not-an-engine-argument", [], kwargs={"max_tokens": 16}),
    Case("gptq-on-unquantized-checkpoint", [], kwargs={"quantization": "gptq"}),
    Case("kv-cache-dtype-unknown", [], kwargs={"kv_cache_dtype": "nova"}),
    Case("hf-overrides-heads-3", [], kwargs={"hf_overrides": {"num_attention_heads": 3}}),
    Case("speculative-method-unknown", [], kwargs=SPECULATIVE_NOVA),
    Case("tensor-parallel-3", [], kwargs={"tensor_parallel_size": 3}),
    Case("vllm-py-in-working-directory", [], setup=shadowing_module("vllm")),
    Case("gpu-memory-utilization-above-one", [], kwargs={"gpu_memory_utilization": 1.5}),
    Case("tokenizer-path-missing", [], kwargs={"tokenizer": MISSING}),
    Case("quantization-fp8-on-cpu", [], kwargs={"quantization": "fp8"}),
    Case("lora-max-loras-zero", [], kwargs={"enable_lora": True, "max_loras": 0}),
    Case("seed-not-a-number", [], kwargs={"seed": "abc"}),
    Case("max-model-len-not-a-number", [], kwargs={"max_model_len": "32k"}),
    Case("executor-backend-ray-not-installed", [], kwargs={"distributed_executor_backend": "ray"}),
    Case(
        "remote-code-trusted-modeling-file-missing",
        [],
        model=remote_code_architecture,
        kwargs={"trust_remote_code": True},
    ),
    Case("block-size-7", [], kwargs={"block_size": 7}),
    other_release("transformers-4.51-on-path", "transformers==4.51.3"),
    other_release("tokenizers-0.19-on-path", "tokenizers==0.19.1"),
    other_release("pydantic-1-on-path", "pydantic==1.10.21"),
]

SGLANG_ENGINE_CASES = [
    *shared_cases("config-more-layers-than-checkpoint"),
    Case("context-length-beyond-model", [], kwargs={"context_length": 65536}),
    Case("keyword-not-a-server-argument", [], kwargs={"max_model_len": 2048}),
    Case("gptq-on-unquantized-checkpoint", [], kwargs={"quantization": "gptq"}),
    Case("attention-backend-unknown", [], kwargs={"attention_backend": "nova"}),
    Case("tp2-on-one-device", [], kwargs={"tp_size": 2}),
    Case("sglang-py-in-working-directory", [], setup=shadowing_module("sglang")),
    Case("kv-cache-dtype-unknown", [], kwargs={"kv_cache_dtype": "nova"}),
    Case("load-format-unknown", [], kwargs={"load_format": "nova"}),
    Case("tokenizer-path-missing", [], kwargs={"tokenizer_path": MISSING}),
    Case("chat-template-path-missing", [], kwargs={"chat_template": MISSING + ".jinja"}),
    Case("speculative-algorithm-unknown", [], kwargs={"speculative_algorithm": "NOVA"}),
    Case("dp2-on-cpu", [], kwargs={"dp_size": 2}),
    Case(
        "remote-code-trusted-modeling-file-missing",
        [],
        model=remote_code_architecture,
        kwargs={"trust_remote_code": True},
    ),
]

TRANSFORMERS_SCRIPT_CASES = [
    *shared_cases("unknown-quantization-method-in-config", "address-space-limit-3g"),
    Case("device-map-cuda-on-cpu-torch", [], kwargs={"device_map": "cuda"}),
    Case("flash-attention-2-not-installed", [], kwargs={"attn_implementation": "flash_attention_2"}),
    Case(
        "bitsandbytes-8bit-not-installed",
        [],
        kwargs={"quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": True}},
    ),
    Case("device-map-auto-memory-too-small", [], kwargs={"device_map": "auto", "max_memory": {"cpu": "1MB"}}),
    Case("dtype-not-a-dtype", [], kwargs={"dtype": "float8"}),
    Case("transformers-py-in-working-directory", [], setup=shadowing_module("transformers")),
    Case(
        "remote-code-trusted-modeling-file-missing",
        [],
        model=remote_code_architecture,
        kwargs={"trust_remote_code": True},
    ),
    Case("gptq-config-without-backend", [], kwargs={"quantization_config": {"quant_method": "gptq", "bits": 4}}),
    Case("awq-config-without-backend", [], kwargs={"quantization_config": {"quant_method": "awq", "bits": 4}}),
    Case("attn-implementation-unknown", [], kwargs={"attn_implementation": "nova"}),
    Case("device-map-mps-on-linux", [], kwargs={"device_map": "mps"}),
    Case("load-in-4bit-keyword", [], kwargs={"load_in_4bit": True}),
    other_release("accelerate-0.20-on-path", "accelerate==0.20.3", kwargs={"device_map": "auto"}),
    other_release("tokenizers-0.19-on-path", "tokenizers==0.19.1"),
    other_release("huggingface-hub-0.23-on-path", "huggingface_hub==0.23.5"),
    other_release("safetensors-0.3-on-path", "safetensors==0.3.3"),
    other_release("numpy-1.26-on-path", "numpy==1.26.4"),
    other_release("torch-2.14-cuda-on-path", TORCH_OTHER_RELEASE),
    *QUANTIZED_CASES,
]

LLAMA_SERVER_CASES = [
    Case("mmproj-file-missing", ["--mmproj", MISSING + ".gguf"]),
    Case("grammar-file-missing", ["--grammar-file", MISSING + ".gbnf"]),
    Case("chat-template-file-missing", ["--chat-template-file", MISSING + ".jinja"]),
    Case("context-not-a-number", ["-c", "8k"]),
    Case("rope-scaling-unknown", ["--rope-scaling", "nova"]),
    Case("api-key-file-missing", ["--api-key-file", MISSING + ".txt"]),
    Case("override-kv-malformed", ["--override-kv", "llama.context_length=8192"]),
    Case("numa-unknown", ["--numa", "nova"]),
    Case("host-not-local", ["--host", "10.255.255.1"]),
    Case("port-out-of-range", ["--port", "99999"]),
    Case("control-vector-missing", ["--control-vector", MISSING + ".gguf"]),
    Case("gpu-layers-not-a-number", ["-ngl", "all layers"]),
    Case("hub-download-without-curl", ["-hf", "ggml-org/gemma-3-1b-it-GGUF"]),
    Case("chat-template-unknown", ["--chat-template", "nova"]),
    Case("chat-template-file-syntax-error", ["--jinja", "--chat-template-file", BAD_TEMPLATE], setup=bad_template),
    Case("model-as-lora", ["--lora", str(ROOT / "models" / "tiny-llama.gguf")]),
    Case("reasoning-format-unknown", ["--reasoning-format", "nova"]),
    Case("pooling-unknown", ["--embeddings", "--pooling", "nova"]),
    Case("threads-not-a-number", ["-t", "two"]),
    Case("draft-max-beyond-context", ["-md", str(ROOT / "models" / "tiny-llama.gguf"), "--draft-max", "100000"]),
    Case("slot-save-path-not-writable", ["--slot-save-path", "/proc/firstlight-slots"]),
    Case("rope-freq-base-not-a-number", ["--rope-freq-base", "ten-thousand"]),
    Case("n-gpu-layers-on-cpu-build-with-device", ["--device", "CUDA0"]),
]

CASES = {
    "sglang": SGLANG_CASES,
    "vllm": VLLM_CASES,
    "transformers": TRANSFORMERS_CASES,
    "vllm-serve": VLLM_SERVE_CASES,
    "vllm-llm": VLLM_LLM_CASES,
    "sglang-engine": SGLANG_ENGINE_CASES,
    "transformers-script": TRANSFORMERS_SCRIPT_CASES,
    "llama-server": LLAMA_SERVER_CASES,
}


def launch_argv(engine: Engine, case: Case) -> list[str]:
    model = case.model() if callable(case.model) else (case.model or engine.model)
    if engine.keywords:
        kwargs = {engine.model_flag or "model": str(model), **dict(map(_keyword, engine.args)), **case.kwargs}
        arguments = json.dumps({key: value for key, value in kwargs.items() if value is not None})
        return [str(engine.python), *(case.entry or engine.entry), arguments]
    own = {flag for flag in case.args if flag.startswith("-")}
    base = [part for flag, value in engine.args if flag not in own for part in (flag, value) if part is not None]
    model_args = [str(model)] if engine.model_flag is None else [engine.model_flag, str(model)]
    return [str(engine.python), *(case.entry or engine.entry), *model_args, *base, *case.args]


def _keyword(arg: tuple[str, str | None]) -> tuple[str, object]:
    """An engine flag as a script's keyword argument: a flag that stands alone is True, a number a number."""
    name, value = arg
    if value is None:
        return name, True
    return name, int(value) if value.isdigit() else value


def record(engine_name: str, case: Case, out: Path) -> dict[str, object]:
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
        code = wait_for_exit(proc, log, engine.ready, case.timeout)
        _reap_group(proc.pid)
    if engine.ready is None and code == 0:
        code = "came up: not a failure (the script ran to its end)"
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


def wait_for_exit(proc: subprocess.Popen[bytes], log: Path, ready: bytes | None, timeout: float) -> int | str:
    """The exit code; or what happened instead (a case the engine accepts comes up and is stopped)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            return code
        if ready is not None and ready in log.read_bytes():
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
