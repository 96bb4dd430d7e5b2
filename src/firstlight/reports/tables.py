"""Benchmark results as tables: for the terminal (rich) and for Markdown."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from firstlight.reports.data import level_key, level_name

COLUMNS = (
    "level",
    "ok/fail",
    "req/s",
    "out tok/s",
    "TTFT p50",
    "TTFT p99",
    "TPOT p50",
    "TPOT p99",
    "ITL p50",
    "ITL p99",
    "E2E p50",
    "tok/chunk",
    "accept",
    "client",
)


def _p(dist: dict[str, float] | None, key: str) -> str:
    return f"{dist[key]:.1f}" if dist and dist.get(key) is not None else "-"


def _accept(spec: dict[str, Any] | None) -> str:
    if not spec:
        return "-"
    rate = spec.get("acceptance_rate")
    length = spec.get("mean_acceptance_length")
    text = f"{length:.2f} len" if length is not None else ""
    if rate is not None:
        text += f", {rate * 100:.0f}%"
    if "not scoped" in spec.get("scope", ""):
        text += " (running avg)"
    return text or "-"


def _client(client: dict[str, Any] | None) -> str:
    if not client:
        return "-"
    flag = " LIMITED" if client.get("client_limited") else ""
    n = len(client.get("workers") or ())
    workers = f" {n} worker{'s' if n > 1 else ''}" if n else ""  # lag and cpu: the worst worker's
    return f"{_load(client)}{workers}{flag}"


def _load(health: dict[str, Any]) -> str:
    """A client's event-loop lag (p99) and CPU, as the tables show them."""
    return f"lag {health['loop_lag_p99_ms']:.1f}ms cpu {health['cpu_pct']:.0f}%"


def worker_lines(run: dict[str, Any]) -> list[str]:
    """Each worker process's own health, one line for each level sent by several (`bench --workers`)."""
    lines = []
    for lv in run["levels"]:
        workers = (lv.get("client") or {}).get("workers")
        if workers:
            lines.append(f"{level_name(lv)} workers: " + "; ".join(_worker(w) for w in workers))
    return lines


def _worker(w: dict[str, Any]) -> str:
    if "died" in w:
        return f"#{w['worker']} died ({w['died']}) after {w['requests']} requests"
    if "cpu_pct" not in w:
        return f"#{w['worker']} stopped before the start"
    flag = " LIMITED" if w["client_limited"] else ""
    return f"#{w['worker']} {w['requests']} req, {_load(w)}{flag}"


def level_row(lv: dict[str, Any]) -> list[str]:
    state = "" if lv.get("state") == "complete" else f" [{lv.get('state')}]"
    tpc = lv.get("mean_tokens_per_chunk")
    return [
        level_name(lv) + state,
        f"{lv.get('completed', 0)}/{lv.get('failed', 0)}",
        f"{lv.get('request_throughput_req_s') or 0:.2f}",
        f"{lv.get('output_throughput_tok_s') or 0:.1f}",
        _p(lv.get("ttft_ms"), "p50"),
        _p(lv.get("ttft_ms"), "p99"),
        _p(lv.get("tpot_ms"), "p50"),
        _p(lv.get("tpot_ms"), "p99"),
        _p(lv.get("itl_ms"), "p50"),
        _p(lv.get("itl_ms"), "p99"),
        _p(lv.get("e2e_ms"), "p50"),
        f"{tpc:.2f}" if tpc else "-",
        _accept(lv.get("spec_decode")),
        _client(lv.get("client")),
    ]


def run_table(run: dict[str, Any]) -> Table:
    table = Table(
        title=f"run {run['run']}: {run['label']} ({run['state']}) — latencies in ms",
        title_justify="left",
        caption="\n".join(worker_lines(run)) or None,
        caption_justify="left",
        show_edge=False,
    )
    for col in COLUMNS:
        table.add_column(col, justify="left" if col == "level" else "right", no_wrap=True)
    for lv in run["levels"]:
        table.add_row(*level_row(lv))
    return table


def comparison(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Level by level against the first run (the baseline): throughput speedup and TPOT ratio."""
    base = {level_key(lv): lv for lv in runs[0]["levels"]}
    rows = []
    for run in runs[1:]:
        for lv in run["levels"]:
            b = base.get(level_key(lv))
            if b is None:
                continue
            rows.append(
                {
                    "level": level_name(lv),
                    "run": run["run"],
                    "label": run["label"],
                    "baseline_tok_s": b.get("output_throughput_tok_s"),
                    "tok_s": lv.get("output_throughput_tok_s"),
                    "speedup": _ratio(lv.get("output_throughput_tok_s"), b.get("output_throughput_tok_s")),
                    "tpot_p50_ratio": _ratio(_get(lv, "tpot_ms"), _get(b, "tpot_ms")),
                    "ttft_p50_ratio": _ratio(_get(lv, "ttft_ms"), _get(b, "ttft_ms")),
                    "acceptance_length": (lv.get("spec_decode") or {}).get("mean_acceptance_length"),
                }
            )
    return rows


def _get(lv: dict[str, Any], key: str) -> float | None:
    d = lv.get(key)
    return d.get("p50") if d else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


COMPARISON_COLUMNS = (
    "level",
    "run",
    "baseline tok/s",
    "tok/s",
    "speedup",
    "TPOT p50 ratio",
    "TTFT p50 ratio",
    "accept len",
)


def comparison_rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    """The comparison as text cells, one row per level of each run after the baseline."""
    return [
        [
            r["level"],
            f"{r['run']} {r['label']}",
            _f(r["baseline_tok_s"]),
            _f(r["tok_s"]),
            _x(r["speedup"]),
            _x(r["tpot_p50_ratio"]),
            _x(r["ttft_p50_ratio"]),
            _f(r["acceptance_length"], 2),
        ]
        for r in comparison(runs)
    ]


def comparison_table(runs: list[dict[str, Any]]) -> Table:
    table = Table(
        title=f"against the baseline, run {runs[0]['run']} ({runs[0]['label']})", title_justify="left", show_edge=False
    )
    for col in COMPARISON_COLUMNS:
        table.add_column(col, justify="right", no_wrap=True)
    for row in comparison_rows(runs):
        table.add_row(*row)
    return table


def _f(v: float | None, digits: int = 1) -> str:
    return f"{v:.{digits}f}" if v is not None else "-"


def _x(v: float | None) -> str:
    return f"{v:.2f}x" if v is not None else "-"


def markdown(runs: list[dict[str, Any]], images: dict[str, str] | None = None) -> str:
    out = []
    for run in runs:
        out.append(f"## Run {run['run']}: {run['label']}\n")
        out.append(
            f"{run['url']}, model `{run['model']}`, state **{run['state']}**"
            + (f" ({run['reason']})" if run.get("reason") else "")
            + f"; tokenizer: {run['tokenizer']}.\n"
        )
        out.append("Latencies in milliseconds.\n")
        out.append("| " + " | ".join(COLUMNS) + " |")
        out.append("|" + "---|" * len(COLUMNS))
        for lv in run["levels"]:
            out.append("| " + " | ".join(level_row(lv)) + " |")
        out.append("")
        workers = worker_lines(run)
        out += [*(f"- {line}" for line in workers), ""] if workers else []
    if len(runs) > 1:
        out.append(f"## Against the baseline (run {runs[0]['run']}, {runs[0]['label']})\n")
        out.append("| " + " | ".join(COMPARISON_COLUMNS) + " |")
        out.append("|" + "---|" * len(COMPARISON_COLUMNS))
        out += ["| " + " | ".join(row) + " |" for row in comparison_rows(runs)]
        out.append("")
    for title, path in (images or {}).items():
        out.append(f"![{title}]({path})\n")
    return "\n".join(out)
