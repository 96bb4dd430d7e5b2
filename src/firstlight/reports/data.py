"""What reports read from stored runs besides `run_data` (the shape of `bench --json`): level names and
keys, and per-request latencies for CDFs."""

from __future__ import annotations

from typing import Any

from firstlight.store import Store


def level_name(level: dict[str, Any]) -> str:
    if level.get("request_rate") is not None:
        cap = f" (max {level['max_concurrency']})" if level.get("max_concurrency") else ""
        return f"rate {level['request_rate']:g}/s{cap}"
    return f"C={level['concurrency']}"


def level_key(level: dict[str, Any]) -> tuple[Any, ...]:
    return (level.get("concurrency"), level.get("request_rate"))


def latencies(store: Store, level_id: int) -> dict[str, list[float]]:
    """Per-request TTFT and E2E (ms) of one level, for CDFs."""
    ttft, e2e = [], []
    for rec in store.requests(level_id):
        if rec.ok and not rec.warmup and rec.chunks:
            ttft.append((rec.ttft or 0) * 1000)
            e2e.append((rec.e2e or 0) * 1000)
    return {"ttft_ms": ttft, "e2e_ms": e2e}
