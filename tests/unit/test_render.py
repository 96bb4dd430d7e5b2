"""render: golden files for every format, systemd-analyze verify, hostile values, secrets, the LWS manifest."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from firstlight.deployment import Deployment, load_deployment
from firstlight.facts import load_facts
from firstlight.rendering import RenderError, render
from firstlight.rendering.systemd import quote_word
from tests.conftest import DATA, firstlight

RENDER = DATA / "render"
FACTS = load_facts(DATA / "facts" / "h200x2-idle.json")
GOLDEN = [
    ("vllm-single.yaml", "systemd"),
    ("vllm-single.yaml", "sh"),
    ("sglang-2nodes.yaml", "systemd"),
    ("sglang-2nodes.yaml", "lws"),
    ("sglang-2nodes.yaml", "slurm"),
    ("vllm-2nodes.yaml", "lws"),
    ("vllm-2nodes.yaml", "slurm"),
]
SECRETS = ("sk-very-secret", "hf_secret_token")


@pytest.fixture(autouse=True)
def fixed_date(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    monkeypatch.delenv("NCCL_NVLS_ENABLE", raising=False)


def rendered(spec: str, fmt: str) -> str:
    text = render(load_deployment(RENDER / spec), fmt, FACTS, source=spec).text
    return text


@pytest.mark.parametrize(("spec", "fmt"), GOLDEN, ids=[f"{s}-{f}" for s, f in GOLDEN])
def test_golden(spec: str, fmt: str) -> None:
    golden = RENDER / "golden" / f"{Path(spec).stem}.{fmt}"
    text = rendered(spec, fmt)
    if os.environ.get("FIRSTLIGHT_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
        pytest.fail(f"{golden.name} rewritten: read the diff, then run again without FIRSTLIGHT_UPDATE_GOLDEN")
    assert text == golden.read_text()
    for secret in SECRETS:
        assert secret not in text  # secrets never in a unit, script or manifest


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    dep = Deployment.model_validate(
        {
            "name": "verify me",
            "engine": "vllm",
            "python": sys.executable,
            "model": str(tmp_path),
            "args": {"max-model-len": 2048},
            "env": {"A_PERCENT": "100%", "API_TOKEN": "x"},
        }
    )
    unit_text = render(dep, "systemd", FACTS, source="test").text
    unit = tmp_path / "firstlight-verify.service"
    unit.write_text(unit_text)
    res = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True)
    problems = [
        line
        for line in res.stderr.splitlines()
        if "firstlight-verify.service" in line and "EnvironmentFile" not in line
    ]
    assert not problems, res.stderr


@pytest.mark.parametrize(
    ("word", "quoted"),
    [
        ("plain", "plain"),
        ("with space", '"with space"'),
        ('say "hi"', '"say \\"hi\\""'),
        ("100%", "100%%"),
        ("$HOME", "$$HOME"),
        ("back\\slash", '"back\\\\slash"'),
        ("${FIRSTLIGHT_API_KEY}", "${FIRSTLIGHT_API_KEY}"),
    ],
)
def test_execstart_quoting(word: str, quoted: str) -> None:
    assert quote_word(word) == quoted


def test_hostile_values_round_trip_through_systemd_and_sh(tmp_path: Path) -> None:
    hostile = {"model": '/models/my model\'s "best" $HOME 100%'}
    dep = Deployment.model_validate(
        {"engine": "vllm", "python": "/v/python", **hostile, "args": {"chat-template": "{{ '%' }} $x"}}
    )
    unit = render(dep, "systemd", FACTS, source="t").text
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    assert '"/models/my model\'s \\"best\\" $$HOME 100%%"' in line
    script = render(dep, "sh", FACTS, source="t").text
    exec_line = next(x for x in script.splitlines() if x.startswith("exec "))
    # the shell gives back exactly the argv firstlight would run
    echo = subprocess.run(["bash", "-c", "printf '%s\\n' " + exec_line[5:]], capture_output=True, text=True)
    assert '/models/my model\'s "best" $HOME 100%' in echo.stdout.splitlines()
    assert "{{ '%' }} $x" in echo.stdout.splitlines()


def test_newlines_are_rejected() -> None:
    dep = Deployment.model_validate({"engine": "vllm", "python": "/p", "model": "/m", "env": {"X": "a\nb"}})
    with pytest.raises(RenderError, match="newline"):
        render(dep, "systemd", FACTS, source="t")


def test_lws_manifest_has_what_the_api_requires() -> None:
    manifest = yaml.safe_load(rendered("sglang-2nodes.yaml", "lws"))
    assert manifest["apiVersion"] == "leaderworkerset.x-k8s.io/v1" and manifest["kind"] == "LeaderWorkerSet"
    assert manifest["metadata"]["name"] == "firstlight-kimi-k2"
    spec = manifest["spec"]
    assert spec["startupPolicy"] == "LeaderCreated"  # LeaderReady would deadlock: see the comment
    lwt = spec["leaderWorkerTemplate"]
    assert lwt["size"] == 2
    leader = lwt["leaderTemplate"]["spec"]["containers"][0]
    worker = lwt["workerTemplate"]["spec"]["containers"][0]
    assert leader["resources"]["limits"]["nvidia.com/gpu"] == 8
    assert "--dist-init-addr" in leader["args"] and "$(LWS_LEADER_ADDRESS):20000" in leader["args"]
    assert worker["args"][worker["args"].index("--node-rank") + 1] == "$(LWS_WORKER_INDEX)"
    assert leader["startupProbe"]["httpGet"]["path"] == "/health"
    assert leader["startupProbe"]["failureThreshold"] * leader["startupProbe"]["periodSeconds"] >= 600
    volumes = lwt["leaderTemplate"]["spec"]["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in volumes
    secret_env = [e for e in leader["env"] if "valueFrom" in e]
    assert {e["name"] for e in secret_env} == {"FIRSTLIGHT_API_KEY", "HF_TOKEN"}
    vllm = yaml.safe_load(rendered("vllm-2nodes.yaml", "lws"))["spec"]["leaderWorkerTemplate"]
    assert "--headless" in vllm["workerTemplate"]["spec"]["containers"][0]["args"]
    assert "readinessProbe" not in vllm["workerTemplate"]["spec"]["containers"][0]  # headless: no HTTP


def test_multicast_stays_off_when_the_host_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    text = rendered("vllm-single.yaml", "systemd")
    assert 'Environment="NCCL_NVLS_ENABLE=0"' in text


def test_cli_writes_a_0600_env_file_and_never_logs_secrets(tmp_path: Path) -> None:
    out = tmp_path / "kimi.service"
    res = firstlight(
        "render",
        str(RENDER / "sglang-2nodes.yaml"),
        "--format",
        "systemd",
        "-o",
        str(out),
        "--facts",
        str(DATA / "facts" / "h200x2-idle.json"),
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    env = tmp_path / "kimi.env"
    assert (env.stat().st_mode & 0o777) == 0o600
    assert "sk-very-secret" in env.read_text() and "hf_secret_token" in env.read_text()
    for secret in SECRETS:
        assert secret not in out.read_text() and secret not in res.stdout + res.stderr
    bad = firstlight("render", str(RENDER / "vllm-single.yaml"), "--format", "lws", timeout=60)
    assert bad.returncode == 2 and "parallel.nodes" in bad.stderr


@pytest.mark.skipif(Path("/run/systemd/system").is_dir(), reason="systemd runs here: the error path is not taken")
def test_up_with_systemd_where_it_does_not_run_is_a_one_line_error(tmp_path: Path) -> None:
    res = firstlight(
        "up", str(RENDER / "vllm-single.yaml"), "--supervisor", "systemd", store=tmp_path / "s.db", timeout=60
    )
    assert res.returncode == 2 and "systemd is not running" in res.stderr
    assert res.stderr.count("\n") <= 2 and "Traceback" not in res.stderr


def test_pcie_only_gpus_get_a_commented_out_p2p_workaround() -> None:
    facts = load_facts(DATA / "facts" / "h200x2-idle.json")
    facts.gpus.topology = [["X", "PHB"], ["PHB", "X"]]  # constructed: as if the pair had no NVLink
    dep = load_deployment(RENDER / "vllm-single.yaml")
    unit = render(dep, "systemd", facts, source="t").text
    script = render(dep, "sh", facts, source="t").text
    assert '#Environment="NCCL_P2P_DISABLE=1"' in unit.splitlines()
    assert "# export NCCL_P2P_DISABLE=1" in script.splitlines()
    assert "\nexport NCCL_P2P_DISABLE" not in script  # a debugging variable is never set silently


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize(
    "name", ["my models", "it's $HOME", "50% off", 'q"uote', "back\\slash", "ünï cödé"], ids=range(6)
)
def test_hostile_model_paths_pass_systemd_analyze(tmp_path: Path, name: str) -> None:
    """Every rendered setting keeps its meaning with spaces, quotes, $, %, backslash and non-ASCII in the
    model's path (WorkingDirectory=, ExecStart= and the ExecStartPost health check)."""
    model = tmp_path / name / "model"
    model.mkdir(parents=True)
    dep = Deployment.model_validate(
        {"name": "hostile", "engine": "vllm", "python": sys.executable, "model": str(model)}
    )
    unit = tmp_path / "firstlight-hostile.service"
    text = render(dep, "systemd", FACTS, source="test").text
    unit.write_text(text)
    res = subprocess.run(["systemd-analyze", "verify", "--man=no", str(unit)], capture_output=True, text=True)
    problems = [line for line in res.stderr.splitlines() if "firstlight-hostile.service" in line]
    assert not problems, res.stderr
    working = next(line for line in text.splitlines() if line.startswith("WorkingDirectory="))
    assert working == "WorkingDirectory=" + str(model.parent).replace("%", "%%")


def test_the_cli_offers_every_format_the_library_renders() -> None:
    import importlib

    from firstlight.rendering import FORMATS

    assert importlib.import_module("firstlight.cli.render").FORMATS == FORMATS
