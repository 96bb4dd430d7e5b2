"""Metric math: pure functions from request records to a level's summary. Definitions (README):

TTFT  first token-carrying chunk − send time.
E2E   last token-carrying chunk − send time (the trailing usage chunk and [DONE] are not tokens).
TPOT  per request (E2E − TTFT) / (N − 1), N = the server's usage.completion_tokens; requests with N ≤ 1
      have no TPOT (goodput counts their TPOT as 0).
ITL   every gap between consecutive token-carrying chunks of a request, all requests pooled.
      Several tokens in one chunk (speculative decoding, coalescing) are one gap: see tokens/chunk.
Throughput  output tokens (sum of N) and completed requests over the level's wall time, from the
      first send to the last completion.
Goodput  requests that completed and met every SLO, per second.
Rate mode also reports TTFT and E2E from the scheduled send time, so client-side queueing shows.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from firstlight.records import RequestRecord

PERCENTILES = (50, 90, 95, 99)


def distribution(values_s: Iterable[float], scale: float = 1000.0) -> dict[str, float] | None:
    """p50/p90/p95/p99/mean/min/max of values given in seconds, reported in milliseconds."""
    arr = np.fromiter(values_s, dtype=float)
    if arr.size == 0:
        return None
    arr = arr * scale
    out = {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True)}
    out.update(mean=float(arr.mean()), min=float(arr.min()), max=float(arr.max()), n=int(arr.size))
    return out


def meets_slo(r: RequestRecord, slo: dict[str, float]) -> bool:
    if not r.ok:
        return False
    checks = {"ttft": r.ttft, "tpot": r.tpot if r.tpot is not None else 0.0, "e2e": r.e2e}
    if "itl" in slo:
        itls = r.itls()
        checks["itl"] = max(itls) if itls else 0.0
    return all(checks[k] is not None and checks[k] <= limit for k, limit in slo.items())  # type: ignore[operator]


def summarise(
    records: Sequence[RequestRecord], slo: dict[str, float] | None = None, rate_mode: bool = False
) -> dict[str, Any]:
    """The summary of one level. Warm-up records are excluded by the caller's choice of records."""
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    failed = [r for r in measured if not r.ok]
    start = min((r.sent for r in measured if r.sent), default=0.0)
    end = max((r.done for r in measured if r.done), default=start)
    duration = max(end - start, 1e-9)
    tokens = sum(r.output_tokens for r in ok)
    per_chunk = Counter(t for r in ok for t in r.chunk_tokens)
    gaps = [gap for r in ok for gap in r.itls()]
    summary: dict[str, Any] = {
        "completed": len(ok),
        "failed": len(failed),
        "duration_s": duration if measured else 0.0,
        "output_tokens": tokens,
        "input_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "ttft_ms": distribution(r.ttft for r in ok if r.ttft is not None),
        "tpot_ms": distribution(r.tpot for r in ok if r.tpot is not None),
        "itl_ms": distribution(gaps),
        # chunks of one stream that came in one read share its stamp: a gap of exactly 0
        "itl_same_read_pct": 100 * sum(1 for gap in gaps if gap == 0.0) / len(gaps) if gaps else 0.0,
        "e2e_ms": distribution(r.e2e for r in ok if r.e2e is not None),
        "output_throughput_tok_s": tokens / duration if ok else 0.0,
        "request_throughput_req_s": len(ok) / duration if ok else 0.0,
        "tokens_per_chunk": {str(k): v for k, v in sorted(per_chunk.items())},
        "mean_tokens_per_chunk": (sum(k * v for k, v in per_chunk.items()) / sum(per_chunk.values()))
        if per_chunk
        else None,
        "errors": error_summary(failed),
    }
    if slo:
        good = [r for r in ok if meets_slo(r, slo)]
        summary["slo"] = {k: v * 1000 for k, v in slo.items()}
        summary["goodput_req_s"] = len(good) / duration
        summary["good_fraction"] = len(good) / len(measured) if measured else 0.0
    if rate_mode:
        summary["ttft_from_schedule_ms"] = distribution(r.chunks[0] - r.scheduled for r in ok if r.chunks)
        summary["e2e_from_schedule_ms"] = distribution(r.chunks[-1] - r.scheduled for r in ok if r.chunks)
        summary["send_lag_ms"] = distribution(r.sent - r.scheduled for r in measured if r.sent)
    return summary


def error_summary(failed: Sequence[RequestRecord], keep: int = 3) -> dict[str, Any]:
    """Errors counted by kind, with the first few messages of each."""
    out: dict[str, Any] = {}
    for r in failed:
        kind = r.error_kind or "unknown"
        entry = out.setdefault(kind, {"count": 0, "first": []})
        entry["count"] += 1
        if len(entry["first"]) < keep and r.error:
            entry["first"].append(r.error[:300])
    return out
