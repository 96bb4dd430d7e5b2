"""A sweep's plots (matplotlib, no display): each variant's curves with the repeats' spread as error bars,
the speedup over the baseline with its noise band and the 1.0 line, acceptance length, and the Pareto
front of tokens/s per user against tokens/s per GPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from firstlight.reports.plots import finish, style


def _x(row: dict[str, Any]) -> float:
    return float(row["request_rate"] if row.get("request_rate") is not None else row.get("concurrency") or 0)


def _xlabel(data: dict[str, Any]) -> str:
    return "request rate (req/s)" if data["levels"] and data["levels"][0].get("request_rate") else "concurrency"


def _curve(ax: Any, data: dict[str, Any], key: str) -> None:
    for variant, rows in data["table"].items():
        have = [r for r in rows if r.get(key)]
        if have:
            ax.errorbar(
                [_x(r) for r in have],
                [r[key]["median"] for r in have],
                yerr=[r[key]["mad"] for r in have],
                marker="o",
                capsize=3,
                label=variant,
            )


def curves(data: dict[str, Any], path: Path) -> Path:
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (key, title, unit) in zip(
        axes.flat,
        (
            ("throughput", "Output throughput", "tokens/s"),
            ("ttft_p50", "TTFT p50", "ms"),
            ("tpot_p50", "TPOT p50", "ms"),
            ("itl_p50", "ITL p50", "ms"),
        ),
        strict=True,
    ):
        _curve(ax, data, key)
        ax.set(xlabel=_xlabel(data), ylabel=unit, title=title)
        style(ax)
    return finish(fig, path)


def speedup(data: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for variant, rows in data["speedup"].items():
        have = [r for r in rows if r.get("speedup") is not None]
        xs = [_x(r) for r in have]
        ax.plot(xs, [r["speedup"] for r in have], "o-", label=variant)
        ax.fill_between(xs, [r["low"] for r in have], [r["high"] for r in have], alpha=0.2)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
    ax.set(xlabel=_xlabel(data), ylabel=f"× {data['baseline']} (output tokens/s)", title="Speedup over the baseline")
    style(ax)
    return finish(fig, path)


def acceptance(data: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    _curve(ax, data, "accept_len")
    ax.set(xlabel=_xlabel(data), ylabel="mean acceptance length", title="Speculative acceptance")
    style(ax)
    return finish(fig, path)


def pareto(data: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for variant in data["variants"]:
        points = [p for p in data["pareto"] if p["variant"] == variant]
        ax.plot([p["per_user"] for p in points], [p["per_gpu"] for p in points], "o-", label=variant)
    front = sorted((p for p in data["pareto"] if p["front"]), key=lambda p: p["per_user"])
    if front:
        ax.plot([p["per_user"] for p in front], [p["per_gpu"] for p in front], "k:", label="Pareto front")
    ax.set(xlabel="tokens/s per user (1000 / TPOT p50)", ylabel="output tokens/s per GPU", title="Pareto")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return finish(fig, path, scale=False)


def all_plots(data: dict[str, Any], directory: Path, stem: str) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = {"Curves vs load": curves(data, directory / f"{stem}-curves.png")}
    if data["speedup"]:
        out["Speedup over the baseline"] = speedup(data, directory / f"{stem}-speedup.png")
    if any(r.get("accept_len") for rows in data["table"].values() for r in rows):
        out["Acceptance length"] = acceptance(data, directory / f"{stem}-acceptance.png")
    if data["pareto"]:
        out["Pareto: per user vs per GPU"] = pareto(data, directory / f"{stem}-pareto.png")
    return out
