"""Secrets (token, key, secret, password and credential names) are stored redacted and given back whole
only to the watcher that starts the engine. Constructed specs."""

from __future__ import annotations

from pathlib import Path

from firstlight.secrets import REDACTED, merge_secrets, redact_argv, redact_text, split_secrets

SPEC = {
    "engine": "vllm",
    "env": {"HF_TOKEN": "hf_abc", "VLLM_CPU_KVCACHE_SPACE": "1", "AWS_SECRET_ACCESS_KEY": "aws/xyz"},
    "args": {"api-key": "sk-123", "max-model-len": 2048, "enable-prefix-caching": True},
}


def test_mapping_args_and_env_round_trip() -> None:
    public, secrets = split_secrets(SPEC)
    text = repr(public)
    assert "hf_abc" not in text and "sk-123" not in text and "aws/xyz" not in text
    assert public["env"]["HF_TOKEN"] == REDACTED and public["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert public["args"] == {"api-key": REDACTED, "max-model-len": 2048, "enable-prefix-caching": True}
    assert merge_secrets(public, secrets) == SPEC


def test_list_args_round_trip() -> None:
    spec = {
        "engine": "sglang",
        "args": ["--api-key", "sk-1", "--hf-token=hf_2", "--tp-size", "2", "--trust-remote-code"],
    }
    public, secrets = split_secrets(spec)
    assert public["args"] == ["--api-key", REDACTED, f"--hf-token={REDACTED}", "--tp-size", "2", "--trust-remote-code"]
    assert merge_secrets(public, secrets) == spec


def test_a_spec_without_secrets_is_unchanged() -> None:
    spec = {"engine": "vllm", "env": {"A": "1"}, "args": {"dtype": "float32"}}
    assert split_secrets(spec) == (spec, {})


def test_command_lines_are_redacted() -> None:
    argv = ["python", "-m", "vllm", "--api-key", "sk-1", "--port", "8000"]
    assert redact_argv(argv) == ["python", "-m", "vllm", "--api-key", REDACTED, "--port", "8000"]


# Log lines in the engines' own formats, with secrets put in (constructed from the vLLM and llama.cpp lines
# recorded in tests/data): what firstlight stores or shows of an engine's log.
LINES = [
    (
        "(APIServer pid=8130) INFO 11-30 10:53:13 [api_utils.py:286] non-default args: {'host': '127.0.0.1', "
        "'api_key': ['sk-live-4711'], 'max_num_batched_tokens': 8192}",
        "'api_key': ['<redacted>'], 'max_num_batched_tokens': 8192}",
    ),
    ("main: server is listening with --api-key sk-live-4711 -c 8192", "--api-key <redacted> -c 8192"),
    ("env: HF_TOKEN=hf_live_0815 VLLM_CPU_KVCACHE_SPACE=1", "HF_TOKEN=<redacted> VLLM_CPU_KVCACHE_SPACE=1"),
    ('{"hf_token": "hf_live_0815", "max_tokens": 16}', '{"hf_token": "<redacted>", "max_tokens": 16}'),
]


def test_secret_values_in_log_lines_are_redacted_and_token_counts_kept() -> None:
    for line, shown in LINES:
        out = redact_text(line)
        assert shown in out and "sk-live-4711" not in out and "hf_live_0815" not in out
    keep = "ValueError: max_num_batched_tokens (512) is smaller than max_model_len (4096); max_tokens=16"
    assert redact_text(keep) == keep


def test_logs_and_diagnoses_show_no_secret_from_the_engine_log(tmp_path: Path) -> None:
    from firstlight.diagnosis import diagnose_file
    from firstlight.store import Store
    from tests.conftest import firstlight

    log = tmp_path / "engine.log"
    log.write_text("\n".join(line for line, _ in LINES) + "\nValueError: api_key='sk-live-4711' was refused\n")
    store = Store(tmp_path / "s.db")
    launch_id = store.add_launch("x", "vllm", {}, "http://127.0.0.1:1", str(log))
    shown = firstlight("logs", str(launch_id), store=tmp_path / "s.db").stdout
    assert "api_key': ['<redacted>']" in shown and "sk-live-4711" not in shown and "hf_live_0815" not in shown
    diagnosis = diagnose_file(log, "vllm").to_dict()["diagnosis"]
    assert diagnosis["root_cause_line"] == "ValueError: api_key='<redacted>' was refused"
    assert "sk-live-4711" not in str(diagnosis) and "hf_live_0815" not in str(diagnosis)
