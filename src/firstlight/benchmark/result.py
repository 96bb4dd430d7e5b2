"""A stored benchmark run as plain data: what `run_bench` returns, the shape of `bench --json`, and what
reports are made of."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from firstlight.errors import RunNotFound
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


@dataclass(frozen=True)
class BenchResult:
    """One run: its id in the store, its state (complete, or incomplete with a reason) and its data."""

    run_id: int
    data: dict[str, Any]  # run_data(): the run, its configuration and a summary per level

    @property
    def state(self) -> str:
        return str(self.data["state"])

    @property
    def levels(self) -> list[dict[str, Any]]:
        return list(self.data["levels"])

    @classmethod
    def load(cls, store: Store, run_id: int) -> BenchResult:
        return cls(run_id, run_data(store, run_id))


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
