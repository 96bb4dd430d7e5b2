"""A sweep's report: the launch attempts and their diagnoses, each variant's curves with the repeats'
spread, the speedup over the baseline with the crossover, the SLO knee; as rich tables, Markdown, and a
self-contained HTML page with plots."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table

from firstlight.engines import strip_line_prefix
from firstlight.reports.data import level_name
from firstlight.reports.html import STYLE, embed, table

ATTEMPT_COLUMNS = ("variant", "attempt", "rung", "state", "cause", "ready in", "launch")
VARIANT_COLUMNS = ("level", "n", "out tok/s", "TTFT p50", "TPOT p50", "ITL p50", "accept len", "SLO met", "note")


def _stat(stat: dict[str, float] | None, digits: int = 1) -> str:
    if not stat:
        return "-"
    text = f"{stat['median']:.{digits}f}"
    return text + (f" ±{stat['mad']:.{digits}f}" if stat["n"] > 1 else "")


REASON_CHARS = 160


def _short(text: str) -> str:
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def attempt_rows(data: dict[str, Any]) -> list[list[str]]:
    rows = []
    for a in data["attempts"]:
        rung = " ".join(f"--{k} {v}" for k, v in (a["rung"] or {}).items()) or "-"
        cause = ""
        if a["state"] not in ("ready", "stopped"):
            said = strip_line_prefix(a.get("root_cause") or "").strip() or a["reason"] or ""
            cause = _short(f"{a['category']}: {said}" if a["category"] else said)
            if a.get("remedy"):
                cause += f" → {_short(a['remedy'])}"
        ready = f"{a['ready_s']:.0f} s" if a["ready_s"] else "-"
        rows.append([a["variant"], str(a["attempt"]), rung, a["state"], cause, ready, str(a["launch_id"] or "-")])
    return rows


def variant_rows(data: dict[str, Any], variant: str) -> list[list[str]]:
    rows = []
    for row in data["table"][variant]:
        good = row.get("good_fraction")
        note = []
        if row["unstable"]:
            note.append("unstable: " + ", ".join(row["unstable"]))
        if row["repeats"] < data["plan"]["repeats"]:
            why = f" ({_short(row['reasons'][0])})" if row["reasons"] else ""
            note.append(f"{row['repeats']}/{data['plan']['repeats']} repeats{why}")
        rows.append(
            [
                level_name(row),
                str(row["repeats"]),
                _stat(row["throughput"]),
                _stat(row["ttft_p50"]),
                _stat(row["tpot_p50"], 2),
                _stat(row["itl_p50"], 2),
                _stat(row["accept_len"], 2),
                f"{good['median'] * 100:.0f}%" if good else "-",
                "; ".join(note),
            ]
        )
    return rows


def speedup_rows(data: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    head = ["level", *(f"{v} / {data['baseline']}" for v in data["speedup"])]
    rows = []
    for i, level in enumerate(data["levels"]):
        row = [level_name(level)]
        for v in data["speedup"]:
            s = data["speedup"][v][i]
            if s.get("speedup") is None:
                row.append("-")
                continue
            mark = " ≈" if s["within_noise"] else ""
            row.append(f"{s['speedup']:.2f}× [{s['low']:.2f}–{s['high']:.2f}]{mark}")
        rows.append(row)
    return head, rows


def summary_lines(data: dict[str, Any]) -> list[str]:
    lines = []
    for v, c in data["crossover"].items():
        text = f"{v}: {c['verdict']}"
        if c.get("between"):
            text += f", between {c['between'][0]:g} and {c['between'][1]:g} (≈{c['at']:.1f})"
        lines.append(text)
    knee = data.get("knee")
    if knee:
        slo = data["plan"]["slo"]
        targets = ", ".join(f"{k} {v:g}" for k, v in slo.items() if k != "attainment" and v)
        for v, k in knee["per_variant"].items():
            lines.append(
                f"SLO knee of {v} ({targets}): " + (f"up to {k['load']:g}" if k else "not met at the lightest load")
            )
        if knee["best"]:
            lines.append(f"best at the highest load that meets the SLO ({knee['load']:g}): {knee['best']}")
    return lines


def header(data: dict[str, Any]) -> str:
    cells = data["cells"]
    done = sum(1 for c in cells if c["state"] == "complete")
    total = len(data["variants"]) * len(data["levels"]) * data["plan"]["repeats"]
    text = f"sweep {data['sweep']} {data['name']}: {data['state']}, {done}/{total} cells measured"
    return text + (f" ({data['reason']})" if data.get("reason") else "")


def _rich(title: str, head: list[str] | tuple[str, ...], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left")
    for h in head:
        table.add_column(h, justify="left" if h in ("variant", "level", "rung", "cause", "note") else "right")
    for row in rows:
        table.add_row(*row)
    return table


def terminal(data: dict[str, Any]) -> Group:
    parts: list[Any] = [header(data), _rich("launch attempts", ATTEMPT_COLUMNS, attempt_rows(data))]
    for v in data["variants"]:
        parts.append(
            _rich(f"{v} — median ±MAD of the repeats, latencies in ms", VARIANT_COLUMNS, variant_rows(data, v))
        )
    if data["speedup"]:
        head, rows = speedup_rows(data)
        parts.append(_rich("speedup in output tokens/s [noise band] (≈: 1.0 is inside the noise)", head, rows))
    parts += summary_lines(data)
    return Group(*parts)


def _md_table(head: list[str] | tuple[str, ...], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(out)


def markdown(data: dict[str, Any], images: dict[str, str] | None = None) -> str:
    parts = [f"# {header(data)}", "## Launch attempts", _md_table(list(ATTEMPT_COLUMNS), attempt_rows(data))]
    for v in data["variants"]:
        parts += [
            f"## {v} (median ±MAD of the repeats; latencies in ms)",
            _md_table(VARIANT_COLUMNS, variant_rows(data, v)),
        ]
    if data["speedup"]:
        head, rows = speedup_rows(data)
        parts += [f"## Speedup over {data['baseline']} (output tokens/s; ≈: inside the noise)", _md_table(head, rows)]
    parts += ["## Verdicts", "\n".join(f"- {line}" for line in summary_lines(data))]
    parts += [f"## {title}\n\n![{title}]({name})" for title, name in (images or {}).items()]
    return "\n\n".join(parts) + "\n"


def page(data: dict[str, Any], images: dict[str, Path]) -> str:
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>firstlight sweep {data['sweep']}</title>"
        f"<style>{STYLE}</style></head><body><h1>{html.escape(header(data))}</h1>",
        "<h2>Launch attempts</h2>" + table(list(ATTEMPT_COLUMNS), attempt_rows(data)),
    ]
    for v in data["variants"]:
        parts.append(f"<h2>{html.escape(v)}</h2><p class='note'>median ±MAD of the repeats; latencies in ms</p>")
        parts.append(table(list(VARIANT_COLUMNS), variant_rows(data, v)))
    if data["speedup"]:
        head, rows = speedup_rows(data)
        parts.append(f"<h2>Speedup over {html.escape(data['baseline'])}</h2>" + table(head, rows))
    parts.append("<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in summary_lines(data)) + "</ul>")
    parts += [embed(title, path) for title, path in images.items()]
    parts.append("</body></html>")
    return "\n".join(parts)
