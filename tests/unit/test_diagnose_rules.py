"""Diagnosis on logs written from the engines' exact messages (reference/engine-anchors.md)."""

from __future__ import annotations

import io
import json
from pathlib import Path

from firstlight.diagnosis import diagnose_lines
from firstlight.logs import iter_lines
from tests.conftest import DATA, firstlight


def diagnose_text(text: str, engine: str = "auto"):
    return diagnose_lines(iter_lines(io.BytesIO(text.encode())), engine)


SGLANG_8_RANKS_UNBALANCED = "\n".join(
    ["[2026-10-02 09:14:01] server_args={'model_path': '/models/Kimi-K2', 'tp_size': 8}"]
    + [f"[2026-10-02 09:14:11 TP{r}] Init parallel begin." for r in range(8)]
    + [
        f"[2026-10-02 09:14:12 TP{r}] Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "/sgl/python/sglang/srt/distributed/bootstrap.py", line 452, in _check_tp_memory_balance\n'
        f"    raise RuntimeError(msg)\n"
        f"RuntimeError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
        f"pre_model_load_memory=92.3, local_gpu_memory=147.1, local_gpu_memory * 0.9=132.39"
        for r in range(8)
    ]
    + ["[2026-10-02 09:14:13] Received sigquit from a child process. It usually means the child failed."]
)


def test_same_cause_on_eight_ranks_is_one_cause_before_the_wrapper() -> None:
    report = diagnose_text(SGLANG_8_RANKS_UNBALANCED)
    assert report.engine == "sglang" and report.outcome == "failed"
    d = report.diagnosis
    assert d.category == "gpu_memory_imbalance"
    assert d.root_cause_line.startswith("RuntimeError: The memory capacity is unbalanced")
    assert d.repeats == 8
    assert report.last_phase == "distributed_init"


def test_first_exception_of_a_chain_is_the_cause() -> None:
    log = """\
(EngineCore_DP0 pid=11) ERROR 11-01 10:00:01 [core.py:700] EngineCore failed to start.
(EngineCore_DP0 pid=11) ERROR 11-01 10:00:01 [core.py:700] Traceback (most recent call last):
(EngineCore_DP0 pid=11) ERROR 11-01 10:00:01 [core.py:700] KeyError: 'rope_scaling'
(EngineCore_DP0 pid=11) ERROR 11-01 10:00:01 [core.py:700]
(EngineCore_DP0 pid=11) ERROR 11-01 10:00:01 [core.py:700] The above exception was the direct cause of the following exception:
(EngineCore_DP0 pid=11) ERROR 11-01 10:00:01 [core.py:700] RuntimeError: could not build the model config
(APIServer pid=10) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'EngineCore_DP0': 1}
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "unknown"  # no signature knows this; say so rather than guess
    assert d.root_cause_line.endswith("KeyError: 'rope_scaling'")
    assert d.line == 3


def test_specific_cause_beats_later_generic_error() -> None:
    log = """\
[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=70.00 GB
[2026-01-01 10:00:05 TP3] Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 3 has a total capacity of 79.11 GiB
[2026-01-01 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call last):
AssertionError
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "cuda_oom" and "TP3" in d.root_cause_line
    assert "448.00 MiB" in d.remedy


def test_warning_lines_do_not_outrank_errors() -> None:
    log = """\
(APIServer pid=1) WARNING 11-30 00:35:02 [system_utils.py:255] Found ulimit of 20000 and failed to automatically increase with error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open files`.
(Worker pid=3) WARNING 11-30 00:35:15 [custom_all_reduce.py:283] Custom allreduce is disabled because your platform lacks GPU P2P capability or P2P test failed.
(Worker pid=3) ERROR 11-30 00:35:20 [multiproc_executor.py:1063] ValueError: Available memory on node 0 (22.01/23.54 GiB) on kv cache allocation is less than requested memory for kv (64.0 GiB). Decrease --kv-cache-memory-bytes, VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes.
(EngineCore pid=2) ERROR 11-30 00:35:21 [core.py:1510] EngineCore failed to start.
"""
    d = diagnose_text(log).diagnosis
    assert d.category == "insufficient_kv_cache"
    assert "64.0 GiB" in d.remedy and "22.01 GiB" in d.remedy


def test_unknown_engine_and_nothing_recognisable_is_not_ready_not_a_guess() -> None:
    report = diagnose_text("hello\nworld\n")
    assert report.outcome == "not_ready"
    assert report.diagnosis.category == "hang_timeout"
    assert report.diagnosis.root_cause_line == "world"


def test_empty_input() -> None:
    report = diagnose_text("")
    assert report.outcome == "not_ready" and report.lines == 0


def test_bad_inputs_never_traceback(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    latin = tmp_path / "latin1.log"
    latin.write_bytes("RuntimeError: NCCL error: unhandled system error caf\xe9\n".encode("latin-1"))
    cases = [
        (str(empty), 1, "outcome: not_ready"),
        (str(binary), 2, "binary data"),
        (str(latin), 1, "nccl_error"),
        (str(tmp_path / "missing.log"), 2, "no such file"),
    ]
    for path, code, text in cases:
        res = firstlight("diagnose", path, timeout=60)
        assert res.returncode == code, (path, res.stdout, res.stderr)
        assert text in res.stdout + res.stderr
        assert "Traceback" not in res.stderr


def test_unknown_engine_option_is_an_error() -> None:
    res = firstlight("diagnose", str(DATA / "corpus" / "002.log"), "--engine", "foo", timeout=60)
    assert res.returncode == 2 and "--engine" in res.stderr


def test_missing_package_named_by_transformers() -> None:
    # seen for real: transformers serve on CPU without accelerate installed in the engine's environment
    log = (DATA / "startup" / "transformers-no-accelerate.log").read_text()
    d = diagnose_text(log).diagnosis
    assert d.category == "import_dependency_error"
    assert "requires `accelerate`" in d.root_cause_line


def test_missing_model_on_the_h200() -> None:
    # recorded on an H200 by validation/gpu/run.sh (`up --force` with a model path that does not exist)
    report = diagnose_text((DATA / "startup" / "transformers-5.17-h200-missing-model.log").read_text())
    assert report.engine == "transformers" and report.outcome == "failed"
    assert report.diagnosis.category == "missing_model_files"
    assert "no-such-model" in report.diagnosis.remedy


def test_explain_shows_the_candidates_their_scores_and_the_rule() -> None:
    """`diagnose --explain` on a recorded SGLang failure: the winner and the ignored-import warnings it beat."""
    log = DATA / "failures" / "sglang" / "quantization-fp8-on-cpu.log"
    res = firstlight("diagnose", str(log), "--json", "--explain", timeout=60)
    out = json.loads(res.stdout)
    explain = out["explain"]
    assert explain["rule"].startswith("the strongest candidate")
    first, second = explain["candidates"][:2]
    assert first["line"] == out["diagnosis"]["line"] and first["category"] == "hardware_unsupported"
    assert first["score"] > second["score"] and any("ignores" in why for why in second["why"])
    shown = firstlight("diagnose", str(log), "--explain", timeout=60).stdout
    assert "rule:" in shown and "candidates, best first" in shown
    assert "explain" not in json.loads(firstlight("diagnose", str(log), "--json", timeout=60).stdout)
