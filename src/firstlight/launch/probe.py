"""Readiness probing: the engine's own health rule, then one real generated token."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass

import httpx

from firstlight.benchmark import endpoint

PROMPT = "Hello"
KIND = "completions"  # the endpoint every engine serves (some serve no other)


@dataclass
class ProbeResult:
    ok: bool
    stage: str  # "health" or "generate"
    detail: str
    status: int | None = None
    token: str | None = None
    latency_s: float | None = None


def check_health(client: httpx.Client, url: str, path: str) -> ProbeResult:
    try:
        r = client.get(url + path, timeout=5)
    except httpx.HTTPError as e:
        return ProbeResult(False, "health", type(e).__name__)
    return ProbeResult(r.status_code == 200, "health", f"{path} answered {r.status_code}", r.status_code)


def generate_one_token(client: httpx.Client, url: str, model: str, timeout: float) -> ProbeResult:
    """One real token through the streaming API, asked as the benchmark asks (one token needs no per-chunk
    usage counts)."""
    body = endpoint.request_body(KIND, model, PROMPT, 1, usage_per_chunk=False, temperature=0)
    path = endpoint.path(KIND)
    t0 = time.monotonic()
    text, tokens = "", None
    try:
        with client.stream("POST", url + path, json=body, timeout=timeout) as r:
            if r.status_code != 200:
                detail = r.read().decode("utf-8", "replace")[:300]
                return ProbeResult(False, "generate", f"{path} answered {r.status_code}: {detail}", r.status_code)
            for line in r.iter_lines():
                if not line.startswith("data:") or line.strip() == "data: [DONE]":
                    continue
                event = json.loads(line[5:])
                if event.get("error"):
                    return ProbeResult(False, "generate", f"the stream carried an error: {line[:300]}", 200)
                for choice in event.get("choices") or []:
                    text += choice.get("text") or (choice.get("delta") or {}).get("content") or ""
                tokens = (event.get("usage") or {}).get("completion_tokens", tokens)
    except httpx.HTTPError as e:
        return ProbeResult(False, "generate", f"{type(e).__name__}: {e}")
    except (ValueError, AttributeError) as e:
        return ProbeResult(False, "generate", f"unexpected stream: {e}", 200)
    latency = time.monotonic() - t0
    if not text and not tokens:
        return ProbeResult(False, "generate", "the completion carried no generated token", 200)
    return ProbeResult(
        True, "generate", f"generated {tokens or 1} token in {latency * 1000:.0f} ms", 200, text, latency
    )


class ReadinessProber:
    """Probes in a thread with backoff; `hint()` (a phase entered, the engine's ready line) makes it try at
    once and then often, backing off again from there, so readiness is noticed within a fraction of a second
    of the engine's own signal without hammering a server that answers "not yet" (SGLang's /health is 503
    until its warm-up generation is done, and each call writes an access-log line)."""

    SLOW_MAX_S = 2.0
    FAST_S = 0.05

    def __init__(  # type: ignore[no-untyped-def]
        self, url: str, health_path: str, model: str, gen_timeout: float, on_result, api_key: str | None = None
    ) -> None:
        self.url, self.health_path, self.model, self.gen_timeout = url, health_path, model, gen_timeout
        self.api_key = api_key  # a server started with an API key answers /v1 only with it
        self.on_result = on_result
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._hinted = False
        self._thread = threading.Thread(target=self._run, name="readiness-prober", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def hint(self) -> None:
        self._hinted = True
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        delay = 0.5
        last_detail = ""
        with httpx.Client(trust_env=False, headers=endpoint.headers(self.api_key)) as client:
            while not self._stop.is_set():
                self._wake.wait(delay)
                self._wake.clear()
                if self._stop.is_set():
                    return
                if self._hinted:
                    self._hinted, delay = False, self.FAST_S
                result = check_health(client, self.url, self.health_path)
                if result.ok:
                    result = generate_one_token(client, self.url, self.model, self.gen_timeout)
                    if result.ok:
                        self.on_result(result)
                        return
                if result.status is not None and result.detail != last_detail:
                    self.on_result(result)  # an answering server that is not ready yet: worth an event
                    last_detail = result.detail
                delay = min(delay * 1.5, self.SLOW_MAX_S)
