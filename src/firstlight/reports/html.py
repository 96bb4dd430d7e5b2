"""A self-contained HTML page: the tables and the plots, embedded."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from firstlight.reports.tables import COLUMNS, COMPARISON_COLUMNS, comparison_rows, level_row

STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;
margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}td:first-child,
th:first-child{text-align:left}th{background:#f4f4f4}img{max-width:100%;margin:1em 0}.note{color:#666}"""


def page(runs: list[dict[str, Any]], images: dict[str, Path]) -> str:
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>firstlight report</title>"
        f"<style>{STYLE}</style></head><body><h1>Benchmark report</h1>"
    ]
    for run in runs:
        parts.append(
            f"<h2>Run {run['run']}: {html.escape(run['label'])}</h2><p class='note'>"
            f"{html.escape(run['url'])}, model <code>{html.escape(run['model'])}</code>, state "
            f"<b>{run['state']}</b>{' (' + html.escape(run['reason']) + ')' if run.get('reason') else ''}; "
            f"tokenizer: {html.escape(str(run['tokenizer']))}. Latencies in ms.</p>"
        )
        parts.append(table(list(COLUMNS), [level_row(lv) for lv in run["levels"]]))
    if len(runs) > 1:
        parts.append(f"<h2>Against the baseline (run {runs[0]['run']})</h2>")
        parts.append(table(list(COMPARISON_COLUMNS), comparison_rows(runs)))
    parts += [embed(title, path) for title, path in images.items()]
    parts.append("</body></html>")
    return "\n".join(parts)


def table(head: list[str], rows: list[list[str]]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    out += ["<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows]
    return "".join(out) + "</table>"


def embed(title: str, path: Path) -> str:
    """A PNG in the page itself, under its title (the page is one file to mail or attach)."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
