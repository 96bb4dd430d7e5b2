from __future__ import annotations

from pathlib import Path

import pytest

from firstlight.deployment import SpecError, load_deployment
from firstlight.engines import get_engine
from firstlight.engines.base import extra_args
from tests.conftest import ROOT, firstlight


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(text)
    return p


def test_example_spec_loads_with_paths_relative_to_the_file() -> None:
    dep = load_deployment(ROOT / "examples" / "tiny-vllm-cpu.yaml")
    assert dep.engine == "vllm"
    assert dep.python == ROOT / ".venv-engine" / "bin" / "python"  # a venv symlink, not resolved
    assert dep.model == ROOT / "models" / "tiny-llama"
    assert dep.url == "http://127.0.0.1:8000"
    assert dep.env["VLLM_CPU_KVCACHE_SPACE"] == "1"


@pytest.mark.parametrize(
    ("text", "field", "hint"),
    [
        ("python: p\nmodel: m\n", "engine", "engine: vllm"),
        ("engine: vllm\nmodel: m\n", "python", "python:"),
        ("engine: vlm\npython: p\nmodel: m\n", "engine", "one of vllm, sglang, transformers"),
        ("engine: vllm\npython: p\nmodel: m\nport: 70000\n", "port", "port: 8000"),
        ("engine: vllm\npython: p\nmodel: m\nprot: 8000\n", "prot", "unknown field"),
        ("engine: vllm\npython: p\nmodel: m\nstall: {loading: 5}\n", "stall", "weights_loading"),
        ("engine: vllm\npython: p\nmodel: m\nparallel: {tp: 0}\n", "parallel.tp", "tp: 8"),
    ],
)
def test_malformed_spec_names_field_and_fix(tmp_path: Path, text: str, field: str, hint: str) -> None:
    with pytest.raises(SpecError) as err:
        load_deployment(write(tmp_path, text))
    msg = str(err.value)
    assert f"  {field}:" in msg
    assert hint in msg


@pytest.mark.parametrize("text", ["- a\n- b\n", "engine: [vllm\n", ""])
def test_spec_that_is_not_a_mapping(tmp_path: Path, text: str) -> None:
    with pytest.raises(SpecError):
        load_deployment(write(tmp_path, text))


def test_cli_exits_2_on_malformed_spec(tmp_path: Path) -> None:
    res = firstlight("up", str(write(tmp_path, "engine: vllm\n")), store=tmp_path / "s.db", timeout=60)
    assert res.returncode == 2
    assert "python: required field is missing" in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_spec_file(tmp_path: Path) -> None:
    res = firstlight("up", str(tmp_path / "nope.yaml"), store=tmp_path / "s.db", timeout=60)
    assert res.returncode == 2 and "no such spec file" in res.stderr


def test_extra_args_become_flags() -> None:
    args = {
        "enforce-eager": True,
        "disable-log": False,
        "max-model-len": 2048,
        "--x": None,
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
        "lora": ["a", "b"],
    }
    assert extra_args(args) == [
        "--enforce-eager",
        "--max-model-len",
        "2048",
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":3}',
        "--lora",
        "a",
        "--lora",
        "b",
    ]
    assert extra_args(["--foo", "1"]) == ["--foo", "1"]


def test_engine_command_lines(tmp_path: Path) -> None:
    spec = write(
        tmp_path,
        "engine: sglang\npython: /v/bin/python\nmodel: /m/k2\nparallel: {tp: 8, ep: 8}\n"
        "args: {attention-backend: triton}\n",
    )
    dep = load_deployment(spec)
    argv = get_engine("sglang").build_argv(dep)
    assert argv[:3] == ["/v/bin/python", "-m", "sglang.launch_server"]
    assert argv[argv.index("--tp-size") + 1] == "8" and argv[argv.index("--ep-size") + 1] == "8"
    assert argv[-2:] == ["--attention-backend", "triton"]
    dep = dep.model_copy(update={"engine": "vllm"})
    argv = get_engine("vllm").build_argv(dep)
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8" and "--enable-expert-parallel" in argv
    dep = dep.model_copy(update={"engine": "transformers"})
    argv = get_engine("transformers").build_argv(dep)
    assert argv[:3] == ["/v/bin/transformers", "serve", "/m/k2"]
