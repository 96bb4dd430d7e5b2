"""PNG plots of benchmark runs (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from firstlight.reports.data import latencies, level_name
from firstlight.store import Store


def _x(lv: dict[str, Any]) -> float:
    return float(lv["request_rate"] if lv.get("request_rate") is not None else lv.get("concurrency") or 0)


def _xlabel(runs: list[dict[str, Any]]) -> str:
    rate = any(lv.get("request_rate") is not None for r in runs for lv in r["levels"])
    return "request rate (req/s)" if rate else "concurrency"


def throughput(runs: list[dict[str, Any]], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for run in runs:
        lv = [v for v in run["levels"] if v.get("output_throughput_tok_s")]
        ax.plot([_x(v) for v in lv], [v["output_throughput_tok_s"] for v in lv], "o-", label=_name(run))
    ax.set(xlabel=_xlabel(runs), ylabel="output tokens/s", title="Throughput")
    finish(fig, path)
    return path


def latency_vs_load(runs: list[dict[str, Any]], path: Path) -> Path:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, ax, title in (("ttft_ms", axes[0], "TTFT"), ("tpot_ms", axes[1], "TPOT")):
        for run in runs:
            lv = [v for v in run["levels"] if v.get(key)]
            xs = [_x(v) for v in lv]
            ax.plot(xs, [v[key]["p50"] for v in lv], "o-", label=f"{_name(run)} p50")
            ax.plot(xs, [v[key]["p99"] for v in lv], "x--", label=f"{_name(run)} p99")
        ax.set(xlabel=_xlabel(runs), ylabel="ms", title=title)
    return finish(fig, path)


def latency_cdf(store: Store, runs: list[dict[str, Any]], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for run in runs:
        for lv in run["levels"]:
            values = np.sort(latencies(store, lv["level_id"])["e2e_ms"])
            if values.size:
                ax.plot(values, np.arange(1, values.size + 1) / values.size, label=f"{_name(run)} {level_name(lv)}")
    ax.set(xlabel="end-to-end latency (ms)", ylabel="fraction of requests", title="Latency CDF")
    finish(fig, path)
    return path


def all_plots(store: Store, runs: list[dict[str, Any]], directory: Path, stem: str) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "Throughput vs load": throughput(runs, directory / f"{stem}-throughput.png"),
        "TTFT and TPOT vs load": latency_vs_load(runs, directory / f"{stem}-latency.png"),
        "Latency CDF": latency_cdf(store, runs, directory / f"{stem}-cdf.png"),
    }


def _name(run: dict[str, Any]) -> str:
    return f"#{run['run']} {run['label']}"


def style(ax: Any) -> None:
    """Grid, legend, and a log-2 axis where the loads double (1, 8, 64, 256)."""
    xs = [x for line in ax.get_lines() for x in line.get_xdata() if x > 0]
    if xs and max(xs) / min(xs) > 8 and ax.get_xlabel() != "end-to-end latency (ms)":
        ax.set_xscale("log", base=2)  # concurrency ladders double: 1, 8, 64, 256
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def finish(fig: Any, path: Path, scale: bool = True) -> Path:
    """Style every axis (unless `scale` is off), save the figure as PNG and free it."""
    if scale:
        for ax in fig.axes:
            style(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
