"""The OpenAI-compatible API as firstlight speaks it: the path of each endpoint kind, the request bodies,
the fields a server accepts, and the model a server serves. The benchmark, its workload and the
launch's readiness probe all build their requests here, so they ask every engine the same way.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from firstlight.errors import BenchAborted

PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
MODELS_PATH = "/v1/models"


def path(kind: str) -> str:
    """The path of an endpoint kind: `completions` (a prompt) or `chat` (messages)."""
    try:
        return PATHS[kind]
    except KeyError:
        raise ValueError(f"unknown endpoint kind {kind!r}; known: {', '.join(PATHS)}") from None


def request_body(
    kind: str,
    model: str,
    prompt: str,
    max_tokens: int,
    *,
    stream: bool = True,
    usage_per_chunk: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    """One request. A streamed request asks for the server's token usage (`include_usage`), which gives
    each request's true output length; `usage_per_chunk` also asks for the running count on every chunk
    (`continuous_usage_stats`, vLLM), which says how many tokens each chunk carried."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "stream": stream}
    if stream:
        options = {"include_usage": True}
        if usage_per_chunk:
            options["continuous_usage_stats"] = True
        body["stream_options"] = options
    body.update(fields)
    if kind == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    return body


def encode(body: dict[str, Any]) -> bytes:
    """A body as the bytes sent: compact, encoded once before a run so nothing is encoded on the hot path."""
    return json.dumps(body, separators=(",", ":")).encode()


def headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def served_model(url: str, api_key: str | None = None, timeout: float = 10.0) -> str:
    """The first model the server lists; raises BenchAborted when it cannot be asked."""
    try:
        r = httpx.get(url + MODELS_PATH, timeout=timeout, headers=headers(api_key), trust_env=False)
        r.raise_for_status()
        return str(r.json()["data"][0]["id"])
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        raise BenchAborted(f"cannot ask {url}{MODELS_PATH} for the model name ({e}); pass --model") from e


def accepted_extras(
    url: str, kind: str, model: str, extra: dict[str, Any], api_key: str | None = None, timeout: float = 600.0
) -> dict[str, Any]:
    """The sampling fields this server accepts: `ignore_eos` makes output lengths exact on vLLM and SGLang,
    but transformers serve rejects unknown fields (422). One tiny request finds out; a rejected field is
    dropped (the server's usage still gives each request's true length)."""
    body = request_body(kind, model, "hi", 1, stream=False, **extra)
    # httpx's timeout is per read: a server that trickles a byte a second would hold this forever
    deadline = time.monotonic() + timeout
    answer = b""
    try:
        with httpx.stream(
            "POST", url + path(kind), json=body, headers=headers(api_key), timeout=timeout, trust_env=False
        ) as r:
            for piece in r.iter_bytes():
                answer += piece
                if time.monotonic() > deadline:
                    return extra  # the level itself will say what is wrong with the server
            status = r.status_code
    except httpx.HTTPError:
        return extra
    if status in (400, 422) and b"ignore_eos" in answer:
        return {k: v for k, v in extra.items() if k != "ignore_eos"}
    return extra
