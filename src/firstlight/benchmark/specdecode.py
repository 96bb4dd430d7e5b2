"""Speculative-decoding acceptance from the server's own counters, scoped to a level.

Which series to read is the engines' knowledge: every adapter declares its metric names
(`EngineAdapter.spec_decode`) and how its series start in /metrics (`metrics_prefix`); this module
only reads them. A server that exposes counters (vLLM) gives deltas over a level:
  acceptance rate = Δ accepted tokens / Δ draft tokens
  mean acceptance length = 1 + Δ accepted tokens / Δ drafts (the bonus token included, as SGLang's
  `accept len`), and per position Δ accepted[pos] / Δ drafts.
A server that only reports running averages since it started (SGLang's gauges, or /server_info) cannot
be scoped to a level; the result is labelled so.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from firstlight.engines import ENGINES, EngineAdapter

METRICS_PATH = "/metrics"
SERVER_INFO_PATH = "/server_info"
RUNNING_AVERAGE = "running average since server start (not scoped to this level)"


@dataclass(frozen=True)
class MetricNames:
    """Every engine's speculative-decoding series, gathered from the adapters."""

    prefixes: tuple[str, ...]  # a /metrics page with one of these is an engine's
    counters: dict[str, str]  # series name (without _total) → accepted | draft_tokens | drafts
    per_position: frozenset[str]  # counters labelled with `position`
    gauges: dict[str, str]  # series name → accept_length | accept_rate
    server_info_keys: tuple[str, ...]  # /server_info internal_states[*][key]: a mean acceptance length

    @classmethod
    def of(cls, adapters: Iterable[EngineAdapter]) -> MetricNames:
        prefixes: list[str] = []
        counters: dict[str, str] = {}
        per_position: set[str] = set()
        gauges: dict[str, str] = {}
        keys: list[str] = []
        for adapter in adapters:
            if adapter.metrics_prefix:
                prefixes.append(adapter.metrics_prefix)
            names = adapter.spec_decode
            if names is None:
                continue
            for role in ("accepted", "draft_tokens", "drafts"):
                series = getattr(names, role)
                if series:
                    counters[series] = role
            if names.per_position:
                per_position.add(names.per_position)
            if names.accept_length_gauge:
                gauges[names.accept_length_gauge] = "accept_length"
            if names.accept_rate_gauge:
                gauges[names.accept_rate_gauge] = "accept_rate"
            if names.server_info_key:
                keys.append(names.server_info_key)
        return cls(tuple(prefixes), counters, frozenset(per_position), gauges, tuple(keys))


@cache
def known() -> MetricNames:
    """The names of every registered engine."""
    return MetricNames.of(ENGINES.values())


def scrape(url: str, timeout: float = 5.0, names: MetricNames | None = None) -> dict[str, Any] | None:
    """The server's counters now, or None when it exposes none."""
    names = names or known()
    with httpx.Client(base_url=url, timeout=timeout, trust_env=False) as client:
        try:
            r = client.get(METRICS_PATH)
            if r.status_code == 200 and any(prefix in r.text for prefix in names.prefixes):
                return parse_metrics(r.text, names)
        except httpx.HTTPError:
            pass
        if names.server_info_keys:
            try:
                r = client.get(SERVER_INFO_PATH)
                if r.status_code == 200:
                    return parse_server_info(r.json(), names)
            except (httpx.HTTPError, ValueError):
                pass
    return None


def parse_metrics(text: str, names: MetricNames | None = None) -> dict[str, Any]:
    """Counters by role (summed over labels), per-position counters, and gauges by role."""
    names = names or known()
    out: dict[str, Any] = {"source": "metrics", "counters": {}, "per_position": {}, "gauges": {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name.removesuffix("_total")
            total = sample.name.endswith("_total")  # not the _created timestamp of the same counter
            if name in names.counters and total:
                role = names.counters[name]
                out["counters"][role] = out["counters"].get(role, 0.0) + sample.value
            elif name in names.per_position and total:
                pos = sample.labels.get("position", "?")
                out["per_position"][pos] = out["per_position"].get(pos, 0.0) + sample.value
            elif name in names.gauges:
                out["gauges"][names.gauges[name]] = sample.value
    return out


def parse_server_info(info: dict[str, Any], names: MetricNames | None = None) -> dict[str, Any] | None:
    """The mean acceptance length over the ranks that report one."""
    names = names or known()
    states = [s for s in info.get("internal_states") or [] if isinstance(s, dict)]
    lengths = [s[key] for s in states for key in names.server_info_keys if s.get(key) is not None]
    if not lengths:
        return None
    return {"source": "server_info", "accept_length": sum(lengths) / len(lengths), "ranks": len(lengths)}


def acceptance(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any] | None:
    """Acceptance over a level from counters read before and after it; None without speculative decoding."""
    if after is None:
        return None
    if after.get("source") == "server_info":
        return {"scope": RUNNING_AVERAGE, "mean_acceptance_length": after["accept_length"], "source": SERVER_INFO_PATH}
    gauges = after.get("gauges") or {}
    if gauges and not after.get("counters"):
        return {
            "scope": RUNNING_AVERAGE,
            "mean_acceptance_length": gauges.get("accept_length"),
            "acceptance_rate": gauges.get("accept_rate"),
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
