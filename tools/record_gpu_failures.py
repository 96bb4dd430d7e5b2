"""Record how real launches fail on a real GPU: llama.cpp's `llama-server` (built here with CUDA) and transformers
scripts on torch and torchrun over NCCL, on the device machine (one NVIDIA H200).

The companion of `record_failures.py`, which records the CPU engines. It runs ON the device machine, from a copy of
the repository whose `.gpu-carry/` folder holds what the machine cannot fetch: `llama.cpp-src.tar.gz` (the llama.cpp
tree of the llama-cpp-python 0.3.36 sdist, less its models and docs), `tiny-llama.gguf` and the `tiny-llama/` folder.
The tarball needs CMakeLists.txt, cmake/, ggml/, src/, include/, common/, tools/, vendor/, licenses/, app/ and
scripts/ui-assets.cmake (the server's UI step runs it at build time, not at configure time).

It starts the CUDA build of `llama-server` in the background (its log: `llama-build.log`) and meanwhile runs the
torch cases; the llama-server cases follow once the build is done (skipped, and said so, if it fails). Each case is
one real launch with one thing wrong. Its log is stdout and stderr merged exactly as the process wrote them;
index.jsonl gets one line a case: the command as a person types it, the exit code and the time to exit. The category
and the root-cause line are left empty: a person reads the log and fills them in afterwards; this script never asks
firstlight. A case that comes up (llama-server says it is listening; a script exits 0) is no failure: its line says
so and its log goes to `came-up/`. The scripts the torch cases run are copied to `scripts/`, and what a case ran
beside its launch (a process holding the GPU's memory, or one listening on the port torchrun wants) to `setup/`.

The llama-server build is for the H200's own architecture (sm_90) unless --cuda-arch names others: the
`built-sm75-*` cases need a build for an older architecture only, without PTX (`--cuda-arch 75-real`), which cannot
run on the H200. `--no-cuda-fa` leaves out the FlashAttention kernels (-DGGML_CUDA_FA=OFF), which makes the build
much faster. The cases of a set are chosen by name: heldout54g took the sm_90 build and the cases up to
`cuda-alloc-conf-unknown-key` and `kv-cache-mixed-quants-not-built`; heldout56g the sm_75 build and the cases after.

Every child runs in its own session and is killed with its process group and its descendants when its case ends.
NVLink multicast stays off in every child (NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1,
NVSHMEM_DISABLE_NVLS=1), as the device machine asks; nothing uses managed memory.

Usage (on the device machine):
  python3 tools/record_gpu_failures.py OUT_DIR [CASE ...] [--budget S] [--prebuilt DIR] [--cuda-arch A] [--no-cuda-fa]
  CASE         only the cases of these names (default: all)
  --budget     stop starting cases when this many seconds have passed since the start (default 540)
  --prebuilt   a folder holding a `llama-server` already built with CUDA: no build
  --cuda-arch  CMAKE_CUDA_ARCHITECTURES of the build (default 90), as CMake takes it: `75-real`, `80;90`, ...
  --no-cuda-fa build without the FlashAttention CUDA kernels (-DGGML_CUDA_FA=OFF)
"""

from __future__ import annotations

import argparse
import glob
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from record_failures import wait_for_exit  # tools/ is on the path: this script runs from it

ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / ".gpu-carry"
SCRATCH = Path("/tmp/firstlight-gpu-record")
SOURCE_TAR = CARRY / "llama.cpp-src.tar.gz"
BUILD = SCRATCH / "llama-build"
PORT = 8015
BUSY_PORT = 29517  # the port torchrun is told to use while another process listens on it
CASE_TIMEOUT = 90.0
HOST_NOTE = "one NVIDIA H200 (device machine)"
LLAMA_READY = b"llama_server: listening on"
# The device machine's rule for every program: NVLink multicast off (it can take a shared host's GPUs down).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
CMAKE_OPTIONS = [  # the Makefile's ($(LLAMA_BUILT)), with CUDA; the architectures come from --cuda-arch
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_APP=OFF",
    "-DGGML_CUDA=ON",
    "-DGGML_CUDA_FA_ALL_QUANTS=OFF",
]

# A transformers script as a person writes one to try a model on the GPU: load, generate, print.
SERVE = """\
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer{imports}

{before}model_path = "{model}"
tokenizer = AutoTokenizer.from_pretrained(model_path)
model = AutoModelForCausalLM.from_pretrained(model_path, {kwargs})
{after_load}inputs = tokenizer("The capital of France is", return_tensors="pt").to(model.device)
output = model.generate(**inputs, max_new_tokens=16, do_sample=False)
print(tokenizer.decode(output[0], skip_special_tokens=True))
"""

# One all-reduce over NCCL, one process a GPU, as torchrun starts it.
ALLREDUCE = """\
import os

import torch
import torch.distributed as dist

local_rank = int(os.environ["LOCAL_RANK"])
dist.init_process_group("nccl")
torch.cuda.set_device({device})
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
print(f"rank {{dist.get_rank()}}: all_reduce gave {{x[0].item()}}")
dist.destroy_process_group()
"""

# A stale process that listens on a port: another job's rendezvous, say.
LISTENER = """\
import socket
import sys
import time

server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.bind(("0.0.0.0", int(sys.argv[1])))
server.listen()
print(f"listening on 0.0.0.0:{sys.argv[1]}", flush=True)
time.sleep(3600)
"""

# A stale process that holds the GPU's memory: all of what is free but `keep` MiB, plain cudaMalloc through torch.
HOLDER = """\
import sys
import time

import torch

keep = int(sys.argv[1]) << 20
free, total = torch.cuda.mem_get_info()
held = torch.empty(free - keep, dtype=torch.uint8, device="cuda")
free, total = torch.cuda.mem_get_info()
print(f"holding {held.numel() / 2**30:.1f} GiB of {total / 2**30:.1f} GiB; {free >> 20} MiB left free", flush=True)
time.sleep(3600)
"""


def serve_script(
    model: str = "tiny-llama", imports: str = "", before: str = "", after_load: str = "", **kwargs: str
) -> str:
    """`before` goes above the loading, `after_load` between it and the generation; each ends with its newlines."""
    return SERVE.format(
        model=model,
        imports=imports,
        before=before,
        after_load=after_load,
        kwargs=", ".join(f"{key}={value}" for key, value in kwargs.items()),
    )


@dataclass
class Case:
    name: str
    engine: str  # "llama-server" or "transformers"
    argv: list[str]  # as a person types it, in the case's folder (llama-server and torchrun are on the PATH)
    env: dict[str, str | None] = field(default_factory=dict)  # None removes a variable
    script: str | None = None  # written to the case's folder as `script_name` first
    script_name: str = "serve.py"
    hold_gpu_mib: int | None = None  # another process holds all of the GPU's memory but this much meanwhile
    busy_port: int | None = None  # another process listens on this port meanwhile
    prepare: Callable[[Path], None] | None = None  # makes what the launch needs in the case's folder
    ready: bytes | None = None  # a line that says it came up (None: only an exit 0 does)


def llama(name: str, *fault: str, env: dict[str, str | None] | None = None, hold: int | None = None) -> Case:
    argv = ["llama-server", "-m", "tiny-llama.gguf", "--host", "127.0.0.1", "--port", str(PORT), "-ngl", "99"]
    return Case(name, "llama-server", [*argv, *fault], env=env or {}, hold_gpu_mib=hold, ready=LLAMA_READY)


def script(
    name: str,
    text: str,
    env: dict[str, str | None] | None = None,
    hold_gpu_mib: int | None = None,
    prepare: Callable[[Path], None] | None = None,
) -> Case:
    argv = ["python3", "serve.py"]
    return Case(name, "transformers", argv, env=env or {}, script=text, hold_gpu_mib=hold_gpu_mib, prepare=prepare)


def torchrun(
    name: str,
    device: str,
    ranks: int = 2,
    *options: str,
    env: dict[str, str | None] | None = None,
    busy_port: int | None = None,
) -> Case:
    argv = ["torchrun", "--nproc-per-node", str(ranks), *options, "allreduce.py"]
    return Case(
        name,
        "transformers",
        argv,
        env=env or {},
        script=ALLREDUCE.format(device=device),
        script_name="allreduce.py",
        busy_port=busy_port,
    )


def scaled_model(folder: Path) -> None:
    """The tiny model's folder with a config.json for a ~300 GB model (about 150 billion parameters in bf16)."""
    target = folder / "tiny-llama-300g"
    shutil.copytree(CARRY / "tiny-llama", target)
    config = json.loads((target / "config.json").read_text())
    config.update(
        hidden_size=12288,
        intermediate_size=49152,
        num_hidden_layers=70,
        num_attention_heads=96,
        num_key_value_heads=8,
        head_dim=128,
        dtype="bfloat16",
    )
    (target / "config.json").write_text(json.dumps(config, indent=2))


CUDA_BF16 = {"device_map": '"cuda"', "dtype": "torch.bfloat16"}

TORCH_CASES = [
    script(
        "gpu-held-by-another-process-transformers",
        serve_script(device_map='"cuda"', dtype="torch.float16"),
        hold_gpu_mib=300,
    ),
    script("device-map-cuda1-on-one-gpu", serve_script(device_map='"cuda:1"', dtype="torch.float16")),
    script(
        "no-gpu-visible-transformers",
        serve_script(device_map='"cuda"', dtype="torch.float16"),
        env={"CUDA_VISIBLE_DEVICES": ""},
    ),
    script(
        "flash-attention-2-not-installed",
        serve_script(attn_implementation='"flash_attention_2"', **CUDA_BF16),
    ),
    script(
        "bitsandbytes-4bit-not-installed",
        serve_script(
            imports=", BitsAndBytesConfig",
            quantization_config="BitsAndBytesConfig(load_in_4bit=True)",
            device_map='"cuda"',
        ),
    ),
    torchrun("torchrun-2-ranks-on-one-gpu", "local_rank"),
    torchrun("torchrun-2-ranks-same-gpu-nccl", "0"),
    script(
        "config-for-300gb-model-on-one-gpu", serve_script(model="tiny-llama-300g", **CUDA_BF16), prepare=scaled_model
    ),
    script(
        "cuda-alloc-conf-unknown-key",
        serve_script(**CUDA_BF16),
        env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segment:True"},
    ),
    # heldout56g: torchrun over NCCL, one rank on the one GPU (enough to reach NCCL's bootstrap and init)
    torchrun("nccl-socket-ifname-missing", "0", 1, env={"NCCL_SOCKET_IFNAME": "nosuchif0"}),
    torchrun("nccl-net-ib-without-infiniband", "0", 1, env={"NCCL_NET": "IB"}),
    torchrun("nccl-proto-unknown", "0", 1, env={"NCCL_PROTO": "LL256"}),
    torchrun("nccl-p2p-level-unknown", "0", 1, env={"NCCL_P2P_LEVEL": "FAST"}),
    torchrun("torchrun-master-port-in-use", "0", 1, "--master-port", str(BUSY_PORT), busy_port=BUSY_PORT),
    script(
        "cuda-alloc-conf-bad-value",
        serve_script(**CUDA_BF16),
        env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:abc"},
    ),
    script(
        "max-memory-smaller-than-model",  # the tiny model has 7 MB of weights: 2 MiB on the GPU and on the CPU
        serve_script(device_map='"auto"', max_memory='{0: "2MiB", "cpu": "2MiB"}', dtype="torch.float32"),
    ),
    script(
        "set-device-1-with-one-visible",
        serve_script(before="torch.cuda.set_device(1)\n\n", device_map='"cuda"', dtype="torch.float16"),
        env={"CUDA_VISIBLE_DEVICES": "0"},
    ),
    script(
        "torch-compile-triton-cache-unwritable",
        serve_script(after_load="model.forward = torch.compile(model.forward)\n", **CUDA_BF16),
        env={"TRITON_CACHE_DIR": "/proc/triton-cache"},
    ),
]

LLAMA_CASES = [
    llama("kv-cache-200m-tokens-beyond-gpu", "-c", "200000000"),
    llama("gpu-held-by-another-process-llama", "-c", "65536", hold=300),
    llama("batch-ubatch-4m-compute-buffer", "-c", "4000000", "-b", "4000000", "-ub", "4000000"),
    llama("device-cuda3-missing", "--device", "CUDA3"),
    llama("main-gpu-3-split-none", "--main-gpu", "3", "-sm", "none"),
    llama("cuda-visible-7-device-cuda0", "--device", "CUDA0", env={"CUDA_VISIBLE_DEVICES": "7"}),
    llama("tensor-split-4-row-on-one-gpu", "--tensor-split", "1,1,1,1", "-sm", "row"),
    llama("v-cache-q4_0-without-flash-attn", "-fa", "off", "--cache-type-v", "q4_0"),
    llama("kv-cache-mixed-quants-not-built", "-fa", "on", "--cache-type-k", "q8_0", "--cache-type-v", "q4_0"),
    # heldout56g: these need a build for an older architecture only (--cuda-arch 75-real), launched on the H200
    llama("built-sm75-only-on-h200"),
    llama("built-sm75-only-no-gpu-visible", env={"CUDA_VISIBLE_DEVICES": ""}),
    llama("built-sm75-only-device-cuda0-split-row", "--device", "CUDA0", "-sm", "row"),
]


class Build:
    """The CUDA build of llama-server, in a thread: the torch cases run meanwhile."""

    def __init__(self, out: Path, prebuilt: Path | None, options: list[str]) -> None:
        self.log = out / "llama-build.log"
        self.bin: Path | None = prebuilt
        self.options = options  # besides CMAKE_OPTIONS: the architectures, FlashAttention
        self.error = ""
        self.seconds = 0.0
        self.thread = threading.Thread(target=self._run, daemon=True)
        if prebuilt is None:
            self.thread.start()

    def done(self) -> bool:
        return not self.thread.is_alive()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self._build()
        except Exception as error:  # the build's own failure is in its log; this says where it stopped
            self.error = f"{type(error).__name__}: {error}"
            with open(self.log, "a") as f:
                f.write(f"\n### build failed: {self.error}\n")
        self.seconds = time.monotonic() - started
        with open(self.log, "a") as f:
            f.write(f"\n### {'failed' if self.error else 'built'} after {self.seconds:.0f} s\n")

    def _step(self, argv: list[str], env: dict[str, str] | None = None) -> int:
        with open(self.log, "a") as f:
            f.write(f"\n### {' '.join(argv)}\n")
            f.flush()
            return subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT, env=env).returncode

    def _build(self) -> None:
        shutil.rmtree(BUILD, ignore_errors=True)
        with tarfile.open(SOURCE_TAR) as tar:
            tar.extractall(SCRATCH, filter="data")
        source = SCRATCH / "llama.cpp"
        generator = ["-G", "Ninja"] if shutil.which("ninja") else []
        configure = ["cmake", "-S", str(source), "-B", str(BUILD), *generator, *CMAKE_OPTIONS, *self.options]
        if self._step(configure) != 0:
            extra = _pip_cublas_options()  # the toolkit without cuBLAS: the pip wheel's, if there is one
            if not extra:
                raise RuntimeError("cmake configure failed (and no pip cuBLAS to fall back on)")
            shutil.rmtree(BUILD, ignore_errors=True)
            if self._step([*configure, *extra]) != 0:
                raise RuntimeError("cmake configure failed, with pip's cuBLAS too")
        jobs = str(os.cpu_count() or 16)
        if self._step(["cmake", "--build", str(BUILD), "--target", "llama-server", "-j", jobs]) != 0:
            raise RuntimeError("cmake --build failed")
        self.bin = BUILD / "bin"


def _pip_cublas_options() -> list[str]:
    headers = glob.glob(f"{sys.prefix}/lib/python3*/site-packages/nvidia/**/include/cublas_v2.h", recursive=True)
    libs = glob.glob(f"{sys.prefix}/lib/python3*/site-packages/nvidia/**/lib/libcublas.so*", recursive=True)
    lts = glob.glob(f"{sys.prefix}/lib/python3*/site-packages/nvidia/**/lib/libcublasLt.so*", recursive=True)
    if not (headers and libs and lts):
        return []
    include = str(Path(headers[0]).parent)
    return [
        f"-DCUDA_cublas_LIBRARY={libs[0]}",
        f"-DCUDA_cublasLt_LIBRARY={lts[0]}",
        f"-DCMAKE_CUDA_FLAGS=-I{include}",
        f"-DCMAKE_CXX_FLAGS=-I{include}",
    ]


def child_env(case: Case, build: Build) -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    if build.bin is not None:
        env["PATH"] = f"{build.bin}:{env['PATH']}"
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [str(build.bin), env.get("LD_LIBRARY_PATH")]))
    for key, value in case.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return {**env, **SAFE_ENV}


def how(case: Case) -> str:
    shown = {"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"} if case.engine == "transformers" else {}
    shown |= case.env
    words = [f"{key}={value}" if value is not None else f"(no {key})" for key, value in shown.items()]
    if case.hold_gpu_mib is not None:
        words.insert(0, f"(another process holds all but {case.hold_gpu_mib} MiB of the GPU's memory: setup/)")
    if case.busy_port is not None:
        words.insert(0, f"(another process listens on port {case.busy_port}: setup/)")
    return " ".join([*words, *case.argv])  # torchrun as typed, also where it ran as `python3 -m torch.distributed.run`


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            text = Path(stat).read_text()
            ppid = int(text[text.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(Path(stat).parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def stop(proc: subprocess.Popen[bytes]) -> None:
    """The child, its process group and every process it started (torchrun's workers, say)."""
    pids = descendants(proc.pid)
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=20)


def beside(
    folder: Path, script: tuple[str, str], arg: int, note: Path, ready: bytes, seconds: float, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start a process a case needs beside its launch (`script`: its file name and text, run with `arg`), its output
    in `note`; return once it says `ready`, or has exited or taken `seconds`."""
    name, text = script
    (folder / name).write_text(text)
    with open(note, "wb") as f:
        f.write(f"$ python3 {name} {arg}\n".encode())
        f.flush()
        proc = subprocess.Popen(
            ["python3", name, str(arg)], cwd=folder, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None and ready not in note.read_bytes():
        time.sleep(0.25)
    return proc


def hold_gpu(folder: Path, keep_mib: int, out: Path, name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    note = out / "setup" / f"{name}.holder.txt"
    holder = beside(folder, ("hold_gpu.py", HOLDER), keep_mib, note, b"holding", 60, env)
    with open(note, "ab") as f:
        f.write(nvidia_smi())
    if b"holding" not in note.read_bytes():
        stop(holder)
        raise RuntimeError(f"the process meant to hold the GPU's memory did not (setup/{note.name})")
    return holder


def listen_on(folder: Path, port: int, out: Path, name: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    note = out / "setup" / f"{name}.listener.txt"
    listener = beside(folder, ("listen.py", LISTENER), port, note, b"listening", 30, env)
    if b"listening" not in note.read_bytes():
        stop(listener)
        raise RuntimeError(f"the process meant to listen on port {port} did not (setup/{note.name})")
    return listener


def record(case: Case, out: Path, build: Build, timeout: float, version: str) -> dict[str, object]:
    folder = SCRATCH / "cases" / case.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    (folder / "tiny-llama.gguf").symlink_to(CARRY / "tiny-llama.gguf")
    (folder / "tiny-llama").symlink_to(CARRY / "tiny-llama")
    if case.prepare is not None:
        case.prepare(folder)
    if case.script is not None:
        (folder / case.script_name).write_text(case.script)
        (out / "scripts" / f"{case.name}.{case.script_name}").write_text(case.script)
    env = child_env(case, build)
    holder = hold_gpu(folder, case.hold_gpu_mib, out, case.name, env) if case.hold_gpu_mib is not None else None
    if case.busy_port is not None:
        holder = listen_on(folder, case.busy_port, out, case.name, env)
    argv = list(case.argv)
    if argv[0] == "torchrun" and shutil.which("torchrun", path=env["PATH"]) is None:
        argv[:1] = ["python3", "-m", "torch.distributed.run"]  # the same launcher, where its script is not on the PATH
    log = out / f"{case.name}.log"
    started = time.monotonic()
    code: int | str
    try:
        with open(log, "wb") as f:
            try:
                proc = subprocess.Popen(
                    argv, cwd=folder, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True
                )
            except OSError as error:
                code = f"could not start: {error}"
            else:
                code = wait_for_exit(proc, log, case.ready, timeout)
                stop(proc)
        seconds = time.monotonic() - started
    finally:
        if holder is not None:
            stop(holder)
            time.sleep(1)  # the driver frees its memory as it goes
    if code == 0 or code == "came up: not a failure":
        code = "came up: not a failure"
        log = log.rename(out / "came-up" / log.name)
    return {
        "id": case.name,
        "file": str(log.relative_to(out)),
        "engine": case.engine,
        "category": "",
        "root_cause_line": "",
        "exit_code": code,
        "seconds_to_exit": round(seconds, 1),
        "how": how(case),
        **({"script": f"scripts/{case.name}.{case.script_name}"} if case.script is not None else {}),
        "recorded": f"{time.strftime('%Y-%m-%d')}, {version}, {HOST_NOTE}",
    }


def nvidia_smi() -> bytes:
    try:
        return subprocess.run(["nvidia-smi"], capture_output=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"nvidia-smi: {error}\n".encode()


def torch_version() -> str:
    versions = {name: importlib.metadata.version(name) for name in ("transformers", "torch")}
    return f"transformers {versions['transformers']} with torch {versions['torch']} (the device's python3)"


def llama_version(build: Build, arch: str) -> str:
    assert build.bin is not None
    run = subprocess.run(
        [str(build.bin / "llama-server"), "--version"],
        capture_output=True,
        text=True,
        env={**os.environ, **SAFE_ENV, "LD_LIBRARY_PATH": str(build.bin)},
        timeout=60,
    )
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.startswith("version")]
    built = lines[0] if lines else "version unknown"
    return f"llama.cpp llama-server {built} from the llama-cpp-python 0.3.36 sdist, CUDA build for {arch}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("cases", nargs="*")
    parser.add_argument("--budget", type=float, default=540.0)
    parser.add_argument("--prebuilt", type=Path)
    parser.add_argument("--cuda-arch", default="90", help="CMAKE_CUDA_ARCHITECTURES of the llama-server build")
    parser.add_argument("--no-cuda-fa", action="store_true", help="build without FlashAttention's CUDA kernels")
    args = parser.parse_intermixed_args()
    start = time.monotonic()
    out = Path(args.out).resolve()
    for sub in ("", "came-up", "scripts", "setup"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    (out / "nvidia-smi.txt").write_bytes(nvidia_smi())
    options = [f"-DCMAKE_CUDA_ARCHITECTURES={args.cuda_arch}", *(["-DGGML_CUDA_FA=OFF"] if args.no_cuda_fa else [])]
    build = Build(out, args.prebuilt, options)
    arch = f"CMAKE_CUDA_ARCHITECTURES={args.cuda_arch}" + (", GGML_CUDA_FA=OFF" if args.no_cuda_fa else "")
    torch_cases = [case for case in TORCH_CASES if not args.cases or case.name in args.cases]
    llama_cases = [case for case in LLAMA_CASES if not args.cases or case.name in args.cases]
    versions = {"transformers": torch_version()}
    skipped: list[str] = []
    with open(out / "index.jsonl", "w") as index:
        while torch_cases or llama_cases:
            left = args.budget - (time.monotonic() - start)
            if build.done() and llama_cases and build.bin is None:
                skipped += [f"{case.name}: the llama-server build failed ({build.error})" for case in llama_cases]
                llama_cases = []
                continue
            if build.done() and llama_cases:
                versions.setdefault("llama-server", llama_version(build, arch))
                case = llama_cases.pop(0)
            elif torch_cases:
                case = torch_cases.pop(0)
            else:
                time.sleep(1)  # only llama cases left: their build is not done yet
                if left < 20:
                    skipped += [f"{case.name}: the build was not done within the budget" for case in llama_cases]
                    break
                continue
            if left < 20:
                skipped.append(f"{case.name}: no time left in the budget")
                continue
            print(f"[{time.monotonic() - start:5.0f} s] {case.name}", flush=True)
            try:
                row = record(case, out, build, min(CASE_TIMEOUT, left - 10), versions[case.engine])
            except Exception as error:  # one case's trouble must not lose the others
                skipped.append(f"{case.name}: the recorder failed: {type(error).__name__}: {error}")
                continue
            index.write(json.dumps(row) + "\n")
            index.flush()
            print(f"        -> {row['exit_code']} after {row['seconds_to_exit']} s", flush=True)
    if not build.done():
        skipped.append(f"(the llama-server build was still running after {time.monotonic() - start:.0f} s)")
    else:
        skipped.append(f"(the llama-server build {'failed' if build.error else 'took'} {build.seconds:.0f} s)")
    (out / "skipped.txt").write_text("".join(line + "\n" for line in skipped))
    print("\n".join(skipped), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
