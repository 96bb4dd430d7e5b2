"""A stored sweep as data, and what it says: per variant and level the median and spread of the repeats,
the speedup of each variant over the baseline with its noise, the crossover concurrency where it drops
below 1.0, the SLO knee, and the Pareto front of tokens/s per user against tokens/s per GPU.

Spread is the median absolute deviation (MAD); a level whose repeats differ from their median by more
than 10% (throughput, TTFT or TPOT) is flagged unstable. A speedup's noise band is the two medians'
relative MADs combined (scaled by 1.4826, the MAD of a normal distribution per σ); a crossover whose
band holds 1.0 is said to be inside the noise.
"""

from __future__ import annotations

import math
from itertools import pairwise
from statistics import median
from typing import Any

from firstlight.benchmark.result import run_data
from firstlight.errors import RunNotFound
from firstlight.store import Store

UNSTABLE = 0.10
MAD_TO_SIGMA = 1.4826
# (key in the result, where in a level's summary, short name)
METRICS = (
    ("throughput", ("output_throughput_tok_s",), "out tok/s"),
    ("ttft_p50", ("ttft_ms", "p50"), "TTFT p50"),
    ("tpot_p50", ("tpot_ms", "p50"), "TPOT p50"),
    ("itl_p50", ("itl_ms", "p50"), "ITL p50"),
    ("e2e_p50", ("e2e_ms", "p50"), "E2E p50"),
    ("accept_len", ("spec_decode", "mean_acceptance_length"), "accept len"),
    ("good_fraction", ("good_fraction",), "SLO met"),
)
STABILITY = ("throughput", "ttft_p50", "tpot_p50")


def spread(values: list[float]) -> dict[str, float]:
    mid = median(values)
    mad = median(abs(v - mid) for v in values)
    worst = max(abs(v - mid) for v in values) / mid if mid else 0.0
    return {"median": mid, "mad": mad, "max_dev": worst, "n": len(values)}


def sweep_data(store: Store, sweep_id: int) -> dict[str, Any]:
    sweep = store.get_sweep(sweep_id)
    if sweep is None:
        raise RunNotFound(f"no sweep {sweep_id} in {store.path}")
    plan = sweep["plan"]
    cells = _latest_cells(store, sweep_id)
    levels = _levels(plan, cells)
    variants = list(plan["variants"])
    table = {v: [_aggregate(v, lvl, cells) for lvl in levels] for v in variants}
    baseline = plan.get("baseline") or variants[0]
    speedups = {v: _speedups(table[baseline], table[v]) for v in variants if v != baseline}
    slo = plan.get("slo") or {}
    return {
        "sweep": sweep_id,
        "name": sweep["name"],
        "state": sweep["state"],
        "reason": sweep["reason"],
        "created": sweep["created"],
        "plan": plan,
        "baseline": baseline,
        "variants": variants,
        "levels": levels,
        "attempts": store.attempts(sweep_id),
        "cells": list(cells.values()),
        "table": table,
        "speedup": speedups,
        "crossover": {v: crossover(rows) for v, rows in speedups.items()},
        "knee": slo_knee(table, levels, slo.get("attainment", 0.9)) if slo else None,
        "pareto": pareto(table, _gpus(store, sweep_id)),
    }


def _latest_cells(store: Store, sweep_id: int) -> dict[tuple[str, int, int], dict[str, Any]]:
    """The cell that counts for each (variant, level, repeat): the complete one, else the latest try."""
    out: dict[tuple[str, int, int], dict[str, Any]] = {}
    for cell in store.cells(sweep_id):
        key = (cell["variant"], cell["level"], cell["repeat"])
        if key in out and out[key]["state"] == "complete":
            continue
        summary = None
        if cell["run_id"] is not None and cell["state"] == "complete":
            try:
                levels = run_data(store, cell["run_id"])["levels"]
            except RunNotFound:
                levels = []
            summary = levels[0] if levels else None
        out[key] = {**cell, "summary": summary}
    return out


def _levels(plan: dict[str, Any], cells: dict[tuple[str, int, int], dict[str, Any]]) -> list[dict[str, Any]]:
    load = plan["load"]
    if load.get("request-rate"):
        pairs = [(load.get("max-concurrency"), r) for r in sorted(load["request-rate"])]
    else:
        pairs = [(c, None) for c in sorted(load["concurrency"])]
    return [{"level": i, "concurrency": c, "request_rate": r} for i, (c, r) in enumerate(pairs)]


def _value(summary: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = summary
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return float(value) if isinstance(value, int | float) else None


def _aggregate(
    variant: str, level: dict[str, Any], cells: dict[tuple[str, int, int], dict[str, Any]]
) -> dict[str, Any]:
    mine = [c for (v, lvl, _), c in sorted(cells.items()) if v == variant and lvl == level["level"]]
    done = [c for c in mine if c["state"] == "complete" and c["summary"]]
    row: dict[str, Any] = {**level, "repeats": len(done), "states": [c["state"] for c in mine]}
    row["reasons"] = sorted({c["reason"] for c in mine if c["reason"] and c["state"] != "complete"})
    unstable = []
    for key, path, _ in METRICS:
        values = [v for c in done if (v := _value(c["summary"], path)) is not None]
        row[key] = spread(values) if values else None
        if key in STABILITY and row[key] and row[key]["n"] > 1 and row[key]["max_dev"] > UNSTABLE:
            unstable.append(key)
    row["unstable"] = unstable
    return row


def _rel(stat: dict[str, float]) -> float:
    return stat["mad"] / stat["median"] if stat["median"] else 0.0


def _speedups(base: list[dict[str, Any]], variant: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for b, v in zip(base, variant, strict=True):
        row: dict[str, Any] = {"level": b["level"], "concurrency": b["concurrency"], "request_rate": b["request_rate"]}
        bt, vt = b.get("throughput"), v.get("throughput")
        if bt and vt and bt["median"] > 0:
            s = vt["median"] / bt["median"]
            noise = MAD_TO_SIGMA * math.hypot(_rel(bt), _rel(vt))
            row.update(speedup=s, low=s * (1 - noise), high=s * (1 + noise))
            row["within_noise"] = row["low"] <= 1.0 <= row["high"]
            bp, vp = b.get("tpot_p50"), v.get("tpot_p50")
            row["per_user"] = bp["median"] / vp["median"] if bp and vp and vp["median"] > 0 else None
        out.append(row)
    return out


def _load(row: dict[str, Any]) -> float:
    return float(row["request_rate"] if row.get("request_rate") is not None else row.get("concurrency") or 0)


def crossover(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the speedup first crosses 1.0 (usually dropping below it as the load grows; a variant slower at
    light load may rise above it): the two loads around it, the load interpolated on a log scale, and
    whether either side's noise band holds 1.0."""
    measured = [r for r in rows if r.get("speedup") is not None]
    if not measured:
        return {"verdict": "not measured"}
    if all(r["speedup"] < 1.0 for r in measured):
        return {"verdict": "slower than the baseline at every load measured", "at": None}
    for before, after in pairwise(measured):
        if (after["speedup"] < 1.0 <= before["speedup"]) or (before["speedup"] < 1.0 <= after["speedup"]):
            x0, x1 = math.log2(_load(before)), math.log2(_load(after))
            s0, s1 = before["speedup"], after["speedup"]
            at = 2 ** (x0 + (x1 - x0) * (s0 - 1.0) / (s0 - s1)) if s0 != s1 else _load(after)
            noisy = bool(before.get("within_noise") or after.get("within_noise"))
            direction = "below" if after["speedup"] < 1.0 else "above"
            return {
                "verdict": f"crosses {direction} 1.0" + (" (inside the repeats' noise)" if noisy else ""),
                "between": [_load(before), _load(after)],
                "at": at,
                "within_noise": noisy,
            }
    return {"verdict": "faster than the baseline at every load measured", "at": None}


def slo_knee(table: dict[str, list[dict[str, Any]]], levels: list[dict[str, Any]], attainment: float) -> dict[str, Any]:
    """Per variant, the highest load up to which every level meets the SLO; and the best variant there."""
    knees: dict[str, Any] = {}
    for variant, rows in table.items():
        knee = None
        for row in rows:
            good = row.get("good_fraction")
            if good is None or good["median"] < attainment:
                break
            knee = row
        knees[variant] = None if knee is None else {"level": knee["level"], "load": _load(knee)}
    reached = [k["level"] for k in knees.values() if k is not None]
    best = None
    if reached:
        top = max(reached)
        candidates = [
            (table[v][top]["throughput"]["median"], v)
            for v, k in knees.items()
            if k is not None and k["level"] == top and table[v][top].get("throughput")
        ]
        best = max(candidates)[1] if candidates else None
        return {"per_variant": knees, "best": best, "load": _load(levels[top])}
    return {"per_variant": knees, "best": None, "load": None}


def pareto(table: dict[str, list[dict[str, Any]]], gpus: dict[str, int]) -> list[dict[str, Any]]:
    """Every measured (variant, level) as tokens/s per user (1000 / TPOT p50) and tokens/s per GPU, with
    the points no other point beats on both marked as the front."""
    points = []
    for variant, rows in table.items():
        for row in rows:
            tpot, thr = row.get("tpot_p50"), row.get("throughput")
            if tpot and thr and tpot["median"] > 0:
                points.append(
                    {
                        "variant": variant,
                        "level": row["level"],
                        "load": _load(row),
                        "per_user": 1000.0 / tpot["median"],
                        "per_gpu": thr["median"] / max(gpus.get(variant, 1), 1),
                    }
                )
    for p in points:
        p["front"] = not any(
            q["per_user"] >= p["per_user"]
            and q["per_gpu"] >= p["per_gpu"]
            and q != p
            and (q["per_user"] > p["per_user"] or q["per_gpu"] > p["per_gpu"])
            for q in points
        )
    return points


def _gpus(store: Store, sweep_id: int) -> dict[str, int]:
    """GPUs per variant, from the spec of its launches (tp × pp × dp; an engine on the CPU counts as one)."""
    out: dict[str, int] = {}
    for attempt in store.attempts(sweep_id):
        if attempt["launch_id"] is None:
            continue
        launch = store.get_launch(attempt["launch_id"])
        parallel = (launch.spec.get("parallel") or {}) if launch else {}
        out[attempt["variant"]] = parallel.get("tp", 1) * parallel.get("pp", 1) * parallel.get("dp", 1)
    return out
