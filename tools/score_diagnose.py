"""Score `firstlight diagnose` on a labelled corpus of failed-launch logs.

Usage: python tools/score_diagnose.py DIR [DIR ...] [--misses] [--json]

Each DIR holds NNN.log files and an index.jsonl whose lines carry at least `id`, `category` and
`root_cause_line` (as in tests/data/corpus). Printed: category and exact root-cause-line accuracy,
overall and per engine, and the calibration of `confidence` (in each confidence band, how often the
category was right). `--misses` lists every log where either was wrong.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from firstlight.diagnosis import diagnose_file

BANDS = ((0.0, 0.4), (0.4, 0.6), (0.6, 0.8), (0.8, 0.9), (0.9, 1.01))


def cases(dirs: list[Path]) -> list[tuple[Path, dict]]:
    out = []
    for d in dirs:
        for index in sorted(d.rglob("index.jsonl")):
            for line in index.read_text().splitlines():
                if line.strip():
                    case = json.loads(line)
                    out.append((index.parent / f"{case['id']}.log", case))
    return out


# diagnose reads lines without colour codes (nor rsyslog's #033 escapes of them); so are labels compared
ANSI = re.compile(r"(?:\x1b|#033)\[[0-9;?]*[A-Za-z]")


def score(path: Path, case: dict) -> dict:
    report = diagnose_file(path)
    d = report.diagnosis
    got_cat = d.category if d else ("ready" if report.outcome == "ready" else "none")
    got_line = d.root_cause_line.strip() if d else ""
    return {
        "log": str(path),
        "engine": case.get("engine", "?"),
        "want": case["category"],
        "got": got_cat,
        "category_ok": got_cat == case["category"],
        "line_ok": got_line == ANSI.sub("", case["root_cause_line"]).strip(),
        "confidence": d.confidence if d else 0.0,
        "got_line": got_line[:200],
        "want_line": case["root_cause_line"].strip()[:200],
        "outcome": report.outcome,
    }


def pct(n: int, total: int) -> str:
    return f"{n}/{total} ({100 * n / total:.0f}%)" if total else "0/0"


def scored(
    score_one: Callable[[Path, dict], dict],
) -> tuple[argparse.Namespace, list[dict], list[tuple[str, list[dict]]]]:
    """The command line both scorers take (DIR... [--misses] [--json]), every case scored with `score_one`, and
    the rows grouped per engine after "all". With --json the rows are printed and no group is returned."""
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--misses", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = [score_one(p, c) for p, c in cases(args.dirs)]
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        return args, rows, []
    by_engine: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_engine[r["engine"]].append(r)
    return args, rows, [("all", rows), *sorted(by_engine.items())]


def main() -> int:
    args, rows, groups = scored(score)
    if args.json:
        return 0
    print(f"{'':14} {'category':>14} {'root-cause line':>16}")
    for name, rs in groups:
        cat = sum(r["category_ok"] for r in rs)
        line = sum(r["line_ok"] for r in rs)
        print(f"{name:14} {pct(cat, len(rs)):>14} {pct(line, len(rs)):>16}")
    print("\ncalibration (confidence band: category right)")
    for lo, hi in BANDS:
        band = [r for r in rows if lo <= r["confidence"] < hi]
        print(f"  [{lo:.1f}, {min(hi, 1.0):.1f}): {pct(sum(r['category_ok'] for r in band), len(band))}")
    if args.misses:
        for r in rows:
            if not (r["category_ok"] and r["line_ok"]):
                print(f"\n{r['log']}  want {r['want']}  got {r['got']} ({r['confidence']:.2f}, {r['outcome']})")
                if not r["line_ok"]:
                    print(f"  want: {r['want_line']}\n  got:  {r['got_line']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
