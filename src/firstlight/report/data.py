"""A stored benchmark run as plain data: the shape of `bench --json` and what reports are made of."""

from __future__ import annotations

from typing import Any

from firstlight.bench.recorder import from_row
from firstlight.store import Store

LEVEL_KEYS = (
    "completed",
    "failed",
    "duration_s",
    "output_tokens",
    "input_tokens",
    "ttft_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "output_throughput_tok_s",
    "request_throughput_req_s",
    "tokens_per_chunk",
    "mean_tokens_per_chunk",
    "errors",
    "slo",
    "goodput_req_s",
    "good_fraction",
    "ttft_from_schedule_ms",
    "e2e_from_schedule_ms",
    "send_lag_ms",
)


class RunNotFound(LookupError):
    pass


def run_data(store: Store, run_id: int) -> dict[str, Any]:
    run = store.get_run(run_id)
    if run is None:
        raise RunNotFound(f"no benchmark run {run_id} in {store.path}")
    levels = []
    for lv in store.levels(run_id):
        if lv["idx"] < 0:
            continue  # warm-up
        summary = lv["summary"] or {}
        levels.append(
            {
                "level_id": lv["id"],
                "concurrency": lv["concurrency"] if lv["request_rate"] is None else None,
                "request_rate": lv["request_rate"],
                "max_concurrency": lv["concurrency"] if lv["request_rate"] is not None else None,
                "state": lv["state"],
                "reason": lv["reason"],
                **{k: summary.get(k) for k in LEVEL_KEYS if k in summary},
                "completed": summary.get("completed", 0),
                "failed": summary.get("failed", 0),
                "spec_decode": lv["spec_decode"],
                "client": lv["client"],
            }
        )
    return {
        "run": run_id,
        "label": run["label"],
        "url": run["url"],
        "model": run["model"],
        "state": run["state"],
        "reason": run["reason"],
        "tokenizer": run["tokenizer"],
        "created": run["created"],
        "config": run["config"],
        "levels": levels,
    }


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
    for row in store.request_rows(level_id):
        rec = from_row(row)
        if rec.ok and not rec.warmup and rec.chunks:
            ttft.append((rec.ttft or 0) * 1000)
            e2e.append((rec.e2e or 0) * 1000)
    return {"ttft_ms": ttft, "e2e_ms": e2e}
