"""Secrets (token, key, secret, password and credential names) are stored redacted and given back whole
only to the watcher that starts the engine. Constructed specs."""

from __future__ import annotations

from firstlight.secrets import REDACTED, merge_secrets, redact_argv, split_secrets

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
