"""Which values are secrets (tokens, API keys, passwords), and a spec without them.

One rule for everything firstlight writes down: the store keeps a spec with its secrets replaced by
REDACTED (the names kept), and units, scripts and manifests refer to them by name. The values reach only
the engine's environment (through the watcher's, never through a file).
"""

from __future__ import annotations

import re
from typing import Any

SECRET_NAME = re.compile(r"(?i)(token|key|secret|password|passwd|credential)")
REDACTED = "<redacted>"


def is_secret(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


# In free text (a log line), a secret-named key or flag and its value: `--api-key VALUE`, `'api_key':
# ['VALUE']`, `HF_TOKEN=VALUE`. The name must end with the secret word, so `max_num_batched_tokens=8192`
# keeps its number.
_NAME = r"[\w.-]*(?:token|key|secret|password|passwd|credential)(?![\w])"
_IN_TEXT = (
    (re.compile(rf"(?i)(--{_NAME}(?:=|\s+))([\"'])(?:(?!\2).)*\2"), r"\1\2" + REDACTED + r"\2"),
    (re.compile(rf"(?i)(--{_NAME}(?:=|\s+))([^\s\"',)]+)"), r"\1" + REDACTED),
    (re.compile(rf"(?i)([\"']{_NAME}[\"']\s*[:=]\s*\[?\s*)([\"'])(?:(?!\2).)*\2"), r"\1\2" + REDACTED + r"\2"),
    (re.compile(rf"(?i)(?<![\w-])({_NAME}\s*[:=]\s*)([\"'])(?:(?!\2).)*\2"), r"\1\2" + REDACTED + r"\2"),
    (re.compile(rf"(?i)(?<![\w-])({_NAME}\s*=\s*)(?!None\b)([^\s\"',)}}\]]+)"), r"\1" + REDACTED),
    # `name: value` (YAML, some loggers); a number after a colon is a count or a time, not a secret
    (re.compile(rf"(?i)(?<![\w-])({_NAME}:\s*)(?![\d.]+\b)(?!None\b)([^\s\"',)}}\]]+)"), r"\1" + REDACTED),
)


def redact_text(text: str) -> str:
    """A line of an engine's log as firstlight may store or show it: secret-named values redacted."""
    for pattern, replacement in _IN_TEXT:
        text = pattern.sub(replacement, text)
    return text


def split_secrets(spec: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the spec with every secret value redacted, the secret values by where they were)."""
    public = dict(spec)
    secrets: dict[str, Any] = {}
    env = spec.get("env") or {}
    hidden_env = {k: v for k, v in env.items() if is_secret(k)}
    if hidden_env:
        public["env"] = {k: REDACTED if k in hidden_env else v for k, v in env.items()}
        secrets["env"] = hidden_env
    args = spec.get("args")
    if isinstance(args, dict):
        hidden = {k: v for k, v in args.items() if is_secret(k) and not isinstance(v, bool) and v is not None}
        if hidden:
            public["args"] = {k: REDACTED if k in hidden else v for k, v in args.items()}
            secrets["args"] = hidden
    elif isinstance(args, list):
        masked, hidden_at = _mask(args)
        if hidden_at:
            public["args"] = masked
            secrets["args_at"] = hidden_at
    return public, secrets


def redact_argv(argv: list[str]) -> list[str]:
    """A command line as it may be stored or shown: the values of secret-named flags redacted."""
    return _mask(argv)[0]


def _mask(args: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """The value after a secret-named flag (`--api-key VALUE`), or the value of `--api-key=VALUE`, masked;
    and the masked values by position."""
    hidden_at: dict[str, Any] = {}
    masked = list(args)
    for i, arg in enumerate(args):
        flag, eq, _ = str(arg).partition("=")
        if flag.startswith("-") and is_secret(flag):
            if eq:
                hidden_at[str(i)], masked[i] = arg, f"{flag}={REDACTED}"
            elif i + 1 < len(args) and not str(args[i + 1]).startswith("-"):
                hidden_at[str(i + 1)], masked[i + 1] = args[i + 1], REDACTED
    return masked, hidden_at


def merge_secrets(public: dict[str, Any], secrets: dict[str, Any]) -> dict[str, Any]:
    """The spec as it was given: `split_secrets` undone."""
    spec = dict(public)
    if secrets.get("env"):
        spec["env"] = {**(public.get("env") or {}), **secrets["env"]}
    if secrets.get("args"):
        spec["args"] = {**(public.get("args") or {}), **secrets["args"]}
    if secrets.get("args_at"):
        args = list(public.get("args") or [])
        for i, value in secrets["args_at"].items():
            args[int(i)] = value
        spec["args"] = args
    return spec
