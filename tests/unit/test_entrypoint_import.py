"""`check` imports the engine's serving entry point in the engine's own interpreter, so an engine that is
installed but cannot start fails before the launch, naming the missing module and its package.

The environments are constructed (a venv without pip holding a package named vllm whose entry point imports
what it needs): the failure is the one seen on a real H200, where `transformers serve` lacked a module
FastAPI needed.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from firstlight.deployment import Deployment
from firstlight.preflight import facts_for, run_checks


def engine_env(root: Path, entrypoint_source: str) -> Path:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "vllm-0.0.1.dist-info").mkdir()
    (site / "vllm-0.0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.0.1\n")
    package = site / "vllm" / "entrypoints" / "openai"
    package.mkdir(parents=True)
    for d in (site / "vllm", site / "vllm" / "entrypoints", package):
        (d / "__init__.py").write_text("")
    (package / "api_server.py").write_text(entrypoint_source)
    return venv / "bin" / "python"


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIRSTLIGHT_CACHE", str(tmp_path / "cache"))


def spec(python: Path, tmp_path: Path) -> Deployment:
    return Deployment.model_validate({"engine": "vllm", "python": str(python), "model": str(tmp_path)})


def test_an_engine_that_cannot_import_fails_check_naming_module_and_package(tmp_path: Path) -> None:
    python = engine_env(tmp_path, "import multipart  # python-multipart is not installed here\n")
    dep = spec(python, tmp_path)
    facts = facts_for(dep)
    (env,) = [f for f in run_checks(facts, dep) if f.id == "engine_env"]
    assert env.severity == "fail"
    assert "vllm 0.0.1 is installed but will not start: it cannot import multipart" in env.message
    assert env.remedy.startswith("pip install python-multipart into that environment")
    assert env.evidence["error"] == "ModuleNotFoundError: No module named 'multipart'"
    assert facts.software is not None and facts.software.entrypoint is not None
    assert not facts.software.entrypoint.cached
    again = facts_for(dep)  # the same interpreter and distributions: answered from the cache
    assert again.software is not None and again.software.entrypoint is not None
    assert again.software.entrypoint.cached and again.software.entrypoint.missing_module == "multipart"


def test_an_engine_that_imports_passes_and_a_new_install_asks_again(tmp_path: Path) -> None:
    python = engine_env(tmp_path, "import json\n")
    dep = spec(python, tmp_path)
    (env,) = [f for f in run_checks(facts_for(dep), dep) if f.id == "engine_env"]
    assert env.severity == "ok", env.message
    site = next((python.parent.parent / "lib").glob("python3*/site-packages"))
    (site / "multipart-0.0.9.dist-info").mkdir()  # any install changes the environment's fingerprint
    found = facts_for(dep).software
    assert found is not None and found.entrypoint is not None and not found.entrypoint.cached
