"""`sweep --dry-run`: the cells, and the exact command line of every launch the sweep would make (each
variant at the ladder's first rung, then what each further rung changes)."""

from __future__ import annotations

import shlex

from firstlight.engines import get_engine
from firstlight.secrets import redact_argv
from firstlight.sweep.ladder import build_ladder
from firstlight.sweep.plan import SweepPlan


def dry_run(plan: SweepPlan) -> list[str]:
    """Lines to print: nothing is started, nothing is stored."""
    cells = plan.cells()
    levels = ", ".join(c.load_name for c in cells if c.variant == cells[0].variant and c.repeat == 0)
    lines = [
        f"sweep {plan.name}: {len(plan.variants)} variant(s) × {len(plan.load.levels())} level(s) × "
        f"{plan.repeats} repeat(s) = {len(cells)} cells; levels {levels}; baseline {plan.baseline}"
    ]
    for variant in plan.variants:
        dep = plan.deployment(variant)
        engine = get_engine(dep.engine)
        ladder = build_ladder(plan.ladder, engine, None)
        argv = redact_argv(engine.argv(ladder.applied(dep)))
        lines += [f"\n{variant}: {len(plan.load.levels()) * plan.repeats} cells", "  " + shlex.join(argv)]
        lines += [f"  ladder: {note}" for note in ladder.notes]
        for rung in ladder.rungs:
            rest = rung.values[1:]
            if rest:
                lines.append(f"  then, on {', '.join(sorted(rung.cures))}: --{rung.flag} " + " → ".join(map(str, rest)))
    return lines
