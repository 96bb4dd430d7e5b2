"""Speculative-decoding acceptance from the server's own counters, scoped to a level.

vLLM exposes Prometheus counters; the deltas over a level give its acceptance:
  acceptance rate = Δ accepted tokens / Δ draft tokens
  mean acceptance length = 1 + Δ accepted tokens / Δ drafts (the bonus token included, as SGLang's
  `accept len`), and per position Δ accepted[pos] / Δ drafts.
SGLang reports `avg_spec_accept_length` in /server_info (and the gauge sglang:spec_accept_length):
a running average since the server started, which cannot be scoped to a level; it is labelled so.
"""

from __future__ import annotations

from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

VLLM_COUNTERS = {
    "vllm:spec_decode_num_accepted_tokens": "accepted",
    "vllm:spec_decode_num_draft_tokens": "draft_tokens",
    "vllm:spec_decode_num_drafts": "drafts",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"


def scrape(url: str, timeout: float = 5.0) -> dict[str, Any] | None:
    """The server's counters now, or None when it exposes none."""
    with httpx.Client(base_url=url, timeout=timeout, trust_env=False) as client:
        try:
            r = client.get("/metrics")
            if r.status_code == 200 and ("vllm:" in r.text or "sglang:" in r.text):
                return parse_metrics(r.text)
        except httpx.HTTPError:
            pass
        try:
            r = client.get("/server_info")
            if r.status_code == 200:
                return parse_server_info(r.json())
        except (httpx.HTTPError, ValueError):
            pass
    return None


def parse_metrics(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {"source": "metrics", "counters": {}, "per_position": {}, "gauges": {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            if name in VLLM_COUNTERS and sample.name.endswith("_total"):
                key = VLLM_COUNTERS[name]
                out["counters"][key] = out["counters"].get(key, 0.0) + sample.value
            elif name == PER_POSITION and sample.name.endswith("_total"):
                pos = sample.labels.get("position", "?")
                out["per_position"][pos] = out["per_position"].get(pos, 0.0) + sample.value
            elif name in ("sglang:spec_accept_length", "sglang:spec_accept_rate"):
                out["gauges"][name] = sample.value
    return out


def parse_server_info(info: dict[str, Any]) -> dict[str, Any] | None:
    states = info.get("internal_states") or []
    lengths = [s.get("avg_spec_accept_length") for s in states if isinstance(s, dict)]
    lengths = [x for x in lengths if x is not None]
    if not lengths:
        return None
    return {"source": "server_info", "avg_spec_accept_length": sum(lengths) / len(lengths), "ranks": len(lengths)}


def acceptance(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """Acceptance over a level from counters read before and after it; None without speculative decoding."""
    if after is None:
        return None
    if after.get("source") == "server_info":
        return {
            "scope": "running average since server start (not scoped to this level)",
            "mean_acceptance_length": after["avg_spec_accept_length"],
            "source": "/server_info",
        }
    gauges = after.get("gauges") or {}
    if gauges and not after.get("counters"):
        return {
            "scope": "running average since server start (not scoped to this level)",
            "mean_acceptance_length": gauges.get("sglang:spec_accept_length"),
            "acceptance_rate": gauges.get("sglang:spec_accept_rate"),
            "source": "/metrics gauges",
        }
    b = (before or {}).get("counters") or {}
    a = after.get("counters") or {}
    d = {k: a.get(k, 0.0) - b.get(k, 0.0) for k in ("accepted", "draft_tokens", "drafts")}
    if not a or d["drafts"] <= 0:
        return None
    pos_before = (before or {}).get("per_position") or {}
    per_pos = {
        p: (v - pos_before.get(p, 0.0)) / d["drafts"] for p, v in sorted((after.get("per_position") or {}).items())
    }
    return {
        "scope": "this level (counter deltas)",
        "source": "/metrics counters",
        "accepted_tokens": d["accepted"],
        "draft_tokens": d["draft_tokens"],
        "drafts": d["drafts"],
        "acceptance_rate": d["accepted"] / d["draft_tokens"] if d["draft_tokens"] else None,
        "mean_acceptance_length": 1 + d["accepted"] / d["drafts"],
        "per_position_acceptance": per_pos,
    }
