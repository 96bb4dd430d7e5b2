"""Score how `firstlight diagnose` reads start-up logs that reached ready or stalled.

Usage: python tools/score_startup.py DIR [DIR ...] [--misses] [--json]

Each DIR holds <id>.log files and an index.jsonl whose lines carry `id`, `outcome` (`ready` or `not_ready`)
and `phases`: {phase: the whole line that first marks it, or {"line": ..., "sure": ..., "why": ...}}, labelled
by a person from the log alone.
Printed, overall and per engine: how often the outcome was right; phase recall (of the labelled phases,
how many diagnose reported) and, of those found, how many on the labelled line; and the phases diagnose
reported that the labels do not have (each one a candidate false phase, or a phase the labeller missed).
"""

from __future__ import annotations

from pathlib import Path

from score_diagnose import ANSI, pct, scored

from firstlight.diagnosis import diagnose_file


def score(path: Path, case: dict) -> dict:
    report = diagnose_file(path)
    # numbered as diagnose numbers them: by "\n" only (a progress bar's "\r" redraws share their line)
    lines = [ANSI.sub("", x.decode("utf-8", "replace")) for x in path.read_bytes().split(b"\n")]
    found = {p.phase: lines[p.line - 1].strip() if 0 < p.line <= len(lines) else "" for p in report.phases}
    # a phase is its line, or {"line": ..., "sure": false, "why": ...} where the labeller hesitated
    wanted = {phase: ANSI.sub("", v["line"] if isinstance(v, dict) else v) for phase, v in case["phases"].items()}
    hit = [p for p in wanted if p in found]
    return {
        "log": str(path),
        "engine": case.get("engine", "?"),
        "want_outcome": case["outcome"],
        "got_outcome": report.outcome,
        "outcome_ok": report.outcome == case["outcome"],
        "wanted": sorted(wanted),
        "missed": [p for p in wanted if p not in found],
        "hit": len(hit),
        "same_line": sum(found[p] == wanted[p].strip() for p in hit),
        "extra": [p for p in found if p not in wanted and p != "process_start"],
        "got_lines": {p: found[p][:160] for p in found},
        "diagnosis": report.diagnosis.root_cause_line[:160] if report.diagnosis else "",
    }


def main() -> int:
    args, rows, groups = scored(score)
    if args.json:
        return 0
    print(f"{'':12} {'outcome':>14} {'phase recall':>16} {'on its line':>14} {'extra phases':>13}")
    for name, rs in groups:
        wanted = sum(len(r["wanted"]) for r in rs)
        hit = sum(r["hit"] for r in rs)
        print(
            f"{name:12} {pct(sum(r['outcome_ok'] for r in rs), len(rs)):>14} {pct(hit, wanted):>16}"
            f" {pct(sum(r['same_line'] for r in rs), hit):>14} {sum(len(r['extra']) for r in rs):>13}"
        )
    if args.misses:
        for r in rows:
            if r["outcome_ok"] and not r["missed"] and not r["extra"]:
                continue
            print(f"\n{r['log']}  want {r['want_outcome']}  got {r['got_outcome']}")
            if r["missed"]:
                print(f"  missed: {', '.join(r['missed'])}")
            if r["extra"]:
                print(f"  extra:  {', '.join(r['extra'])}")
            if r["diagnosis"]:
                print(f"  cause:  {r['diagnosis']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
