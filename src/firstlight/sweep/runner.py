"""Running a sweep: for each variant, check, up (climbing the ladder when a launch fails for a reason a rung
cures), benchmark every missing cell, down, and confirm the engine released what it held before the next
launch. Every attempt and every cell is stored as it ends; a failed cell never stops the sweep, and
`resume` runs only what is missing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from firstlight.benchmark import BenchConfig, run_bench
from firstlight.deployment import Deployment
from firstlight.diagnosis import diagnose_file
from firstlight.engines import get_engine
from firstlight.errors import BenchAborted, BenchError, SpecError, StoreError
from firstlight.launch import Launch, LaunchState
from firstlight.launch.control import start_launch
from firstlight.launch.supervisor import alive
from firstlight.preflight import facts_for, run_checks
from firstlight.store import Store
from firstlight.sweep.ladder import Ladder, build_ladder
from firstlight.sweep.plan import Cell, SweepPlan
from firstlight.sweep.progress import Progress

MAX_DEATHS = 2  # an engine that dies under load is relaunched this often per variant, then the variant ends


@dataclass
class SweepOutcome:
    sweep_id: int
    state: str  # complete, partial (some cells failed or incomplete), interrupted
    cells_done: int
    cells_total: int


class Campaign:
    """One sweep's run: the plan, the store, where the ladder stands, and who is told."""

    def __init__(self, plan: SweepPlan, store: Store, sweep_id: int, progress: Progress, retry_failed: bool) -> None:
        self.plan, self.store, self.sweep_id, self.progress = plan, store, sweep_id, progress
        self.ladders: dict[str, Ladder] = {}
        self.attempt_no = {v: 0 for v in plan.variants}
        done_states = ("complete",) if retry_failed else ("complete", "failed")
        self.done = {
            (c["variant"], c["level"], c["repeat"]) for c in store.cells(sweep_id) if c["state"] in done_states
        }
        for attempt in store.attempts(sweep_id):
            self.attempt_no[attempt["variant"]] = max(self.attempt_no.get(attempt["variant"], 0), attempt["attempt"])

    def run(self) -> SweepOutcome:
        cells = self.plan.cells()
        self.progress.begin(self.sweep_id, cells, [c for c in cells if c.key not in self.done])
        for variant in self.plan.variants:
            todo = [c for c in cells if c.variant == variant and c.key not in self.done]
            if todo:
                self.variant(variant, todo)
        rows = {(c["variant"], c["level"], c["repeat"]): c["state"] for c in self.store.cells(self.sweep_id)}
        complete = sum(1 for c in cells if rows.get(c.key) == "complete")
        state = "complete" if complete == len(cells) else "partial"
        self.store.update_sweep(self.sweep_id, state=state, ended=time.time(), reason=None)
        return SweepOutcome(self.sweep_id, state, complete, len(cells))

    def variant(self, variant: str, todo: list[Cell]) -> None:
        try:
            dep = self.plan.deployment(variant)
        except SpecError as e:
            self.fail_cells(todo, None, f"the variant is not a valid spec: {e}")
            return
        deaths = 0
        while todo:
            launch, attempt_id = self.bring_up(variant, dep)
            if launch is None:
                reason = self.store.attempts(self.sweep_id)[-1]["reason"] or "did not come up"
                self.fail_cells(todo, attempt_id, reason)
                return
            try:
                todo = self.measure(launch, attempt_id, todo)
            finally:
                self.take_down(launch, attempt_id)
            if todo:  # the engine died under load: relaunch for the rest
                deaths += 1
                if deaths > MAX_DEATHS:
                    self.fail_cells(todo, attempt_id, f"the engine died under load {deaths} times")
                    return

    def bring_up(self, variant: str, dep: Deployment) -> tuple[Launch | None, int | None]:
        """Check and launch the variant, climbing the ladder while a rung cures the failure; returns the ready
        launch (or None) and the last attempt's id."""
        engine = get_engine(dep.engine)
        attempt_id = None
        while True:
            facts = facts_for(dep)  # observed again for each attempt: the last one's memory is released now
            if engine.name not in self.ladders:  # a ladder per engine: its flags are the engine's own
                self.ladders[engine.name] = build_ladder(self.plan.ladder, engine, facts)
                self.place_ladder(self.ladders[engine.name])
            ladder = self.ladders[engine.name]
            rung_dep = ladder.applied(dep)
            self.attempt_no[variant] += 1
            attempt_id = self.store.add_attempt(self.sweep_id, variant, self.attempt_no[variant], ladder.current())
            self.progress.attempt(variant, self.attempt_no[variant], ladder.current())
            findings = run_checks(facts, rung_dep)
            if findings.failures:
                first = findings.failures[0]
                self.store.update_attempt(
                    attempt_id,
                    state="check_failed",
                    category=first.id,
                    reason="; ".join(f"{f.id}: {f.message}" for f in findings.failures),
                    remedy=first.remedy,
                    ended=time.time(),
                )
                return None, attempt_id
            launch = Launch(self.store, start_launch(self.store, rung_dep).id, findings)
            self.store.update_attempt(attempt_id, launch_id=launch.id, state="starting")
            started = time.monotonic()
            for event in launch.follow():
                if event is not None and event.phase:
                    self.progress.phase_seen(event.phase)
            record = launch.record
            if record.state == LaunchState.READY:
                ready_s = time.monotonic() - started
                self.progress.launched(ready_s)
                self.store.update_attempt(attempt_id, state="ready", ready_s=ready_s)
                return launch, attempt_id
            diagnosis = (record.diagnosis or {}).get("diagnosis") or {}
            category = diagnosis.get("category")
            launch.down()
            climbed = ladder.climb(category)
            self.store.update_attempt(
                attempt_id,
                state=record.state.value,
                category=category,
                reason=f"{record.reason}" + (f"; next rung: {climbed}" if climbed else ""),
                root_cause=diagnosis.get("root_cause_line"),
                remedy=diagnosis.get("remedy"),
                ended=time.time(),
            )
            if climbed is None:
                return None, attempt_id

    def place_ladder(self, ladder: Ladder) -> None:
        """A resumed sweep starts at the rung its last launch came up on."""
        ready = [a for a in self.store.attempts(self.sweep_id) if a["state"] in ("ready", "stopped", "died")]
        if ready:
            ladder.place(ready[-1]["rung"])

    def measure(self, launch: Launch, attempt_id: int | None, todo: list[Cell]) -> list[Cell]:
        """Benchmark the cells in order; returns those left when the engine died (empty when all ran)."""
        first = True
        for i, cell in enumerate(todo):
            cell_id = self.store.add_cell(
                self.sweep_id, cell.variant, cell.level, cell.concurrency, cell.rate, cell.repeat
            )
            self.store.update_cell(cell_id, attempt_id=attempt_id)
            self.progress.cell_started(cell)
            started = time.monotonic()
            try:
                run_bench(
                    self.bench_config(launch, cell, warmup=first),
                    store=self.store,
                    launch_id=launch.id,
                    on_progress=self.progress.level_seen,
                    on_start=lambda run_id, cid=cell_id: self.store.update_cell(cid, run_id=run_id),
                )
            except BenchAborted as e:
                self.store.update_cell(cell_id, state="incomplete", reason=str(e), ended=time.time())
                self.progress.cell_done(cell, time.monotonic() - started, ok=False)
                gone = self.gone(launch)
                if gone is not None and attempt_id is not None:
                    died = f"{gone} during {cell.load_name}, repeat {cell.repeat}"
                    self.store.update_attempt(attempt_id, state="died", reason=died, **self.why_died(launch))
                    # a heavier level of the same repeat would only kill the relaunched engine again
                    rest = todo[i + 1 :]
                    heavier = [c for c in rest if c.repeat == cell.repeat and c.level > cell.level]
                    self.fail_cells(heavier, attempt_id, f"not run: {gone} at {cell.load_name} in this repeat")
                    return [c for c in rest if c not in heavier]
                continue
            except BenchError as e:
                self.store.update_cell(cell_id, state="failed", reason=str(e), ended=time.time())
                self.progress.cell_done(cell, time.monotonic() - started, ok=False)
                continue
            except BaseException:
                self.store.update_cell(cell_id, state="incomplete", reason="interrupted", ended=time.time())
                raise
            first = False
            self.store.update_cell(cell_id, state="complete", ended=time.time())
            self.done.add(cell.key)
            self.progress.cell_done(cell, time.monotonic() - started, ok=True)
        return []

    @staticmethod
    def gone(launch: Launch) -> str | None:
        """Why the engine no longer serves after a cell stopped early (None: it still does, the cell alone
        failed): its processes are gone, or they live on without serving (a worker lost to OOM)."""
        if _died(launch):
            return "the engine died"
        serves, answer = launch.serves()
        if serves:
            return None
        # a killed engine's processes take a moment to leave the process table: look again
        return "the engine died" if _died(launch) else f"the engine stopped serving ({answer[:200]})"

    @staticmethod
    def why_died(launch: Launch) -> dict[str, Any]:
        """The engine's log, diagnosed as it stands: what it says killed the server under load."""
        found = diagnose_file(launch.log_path, launch.deployment.engine).to_dict().get("diagnosis") or {}
        return {
            "category": found.get("category"),
            "root_cause": found.get("root_cause_line"),
            "remedy": found.get("remedy"),
        }

    def bench_config(self, launch: Launch, cell: Cell, warmup: bool) -> BenchConfig:
        load, dep = self.plan.load, launch.deployment
        return BenchConfig(
            url=launch.url,
            model=launch.adapter.request_model(dep),
            endpoint=load.endpoint,
            concurrency=[cell.concurrency] if cell.rate is None and cell.concurrency else [],
            request_rates=[cell.rate] if cell.rate is not None else [],
            arrival=load.arrival,
            max_concurrency=load.max_concurrency,
            num_requests=load.num_requests,
            duration=load.duration,
            warmup=load.warmup if warmup else 0,
            input_len=load.input_len,
            output_len=load.output_len,
            dataset=load.dataset,
            slo=self.plan.slo.seconds() if self.plan.slo else {},
            label=f"{self.plan.name}/{cell.variant}/{cell.load_name}/r{cell.repeat}",
            timeout=load.timeout,
            # new prompts for every level and repeat: a prefix cache must not serve one cell from another's
            seed=load.seed + 1000 * cell.repeat + cell.level,
            api_key=launch.adapter.api_key(dep),
        )

    def take_down(self, launch: Launch, attempt_id: int | None) -> None:
        """Stop the engine and confirm its processes (and their GPU memory) are gone before the next launch."""
        started = time.monotonic()
        result = launch.down()
        release_s = time.monotonic() - started
        fields: dict[str, Any] = {"release_s": release_s, "gpu_release_s": result.gpu_release_s, "ended": time.time()}
        attempt = next((a for a in self.store.attempts(self.sweep_id) if a["id"] == attempt_id), None)
        if result.survivors or result.gpu_holders:
            held = f"still held after down: pids {result.survivors or result.gpu_holders}"
            fields["reason"] = f"{attempt['reason']}; {held}" if attempt and attempt["reason"] else held
        if launch.record.state == LaunchState.STOPPED and attempt is not None and attempt["state"] == "ready":
            fields["state"] = "stopped"
        if attempt_id is not None:
            self.store.update_attempt(attempt_id, **fields)
        self.progress.released(release_s)

    def fail_cells(self, cells: list[Cell], attempt_id: int | None, reason: str) -> None:
        now = time.time()
        for cell in cells:
            cell_id = self.store.add_cell(
                self.sweep_id, cell.variant, cell.level, cell.concurrency, cell.rate, cell.repeat
            )
            self.store.update_cell(cell_id, state="failed", attempt_id=attempt_id, reason=reason, ended=now)
            self.progress.cell_done(cell, 0.0, ok=False)


def run_sweep(
    plan: SweepPlan,
    *,
    store: Store | Path | str | None = None,
    resume: int | None = None,
    retry_failed: bool = False,
    on_progress: Callable[[Progress], None] | None = None,
) -> SweepOutcome:
    """Run a sweep (or complete the stored sweep `resume`: only its missing cells). Ctrl-C stops the engine
    it started and propagates as KeyboardInterrupt, with the sweep stored as interrupted."""
    db = Store.open(store)
    sweep_id = (
        resume_sweep(db, plan, resume) if resume is not None else db.add_sweep(plan.name, plan.public(), os.getpid())
    )
    progress = Progress(plan, on_progress)
    campaign = Campaign(plan, db, sweep_id, progress, retry_failed)
    try:
        return campaign.run()
    except BaseException as e:
        try:
            db.update_sweep(sweep_id, state="interrupted", reason=_why(e), ended=time.time())
        finally:  # even with a store that can no longer be written, no engine is left running
            stop_leftovers(db, sweep_id, _why(e))
        raise


def resume_sweep(db: Store, plan: SweepPlan, sweep_id: int) -> int:
    """Take up a stored sweep: the same variants (launching the same thing), its leftovers stopped."""
    stored = db.get_sweep(sweep_id)
    if stored is None:
        raise SpecError(f"no sweep {sweep_id} in {db.path}")
    if stored["state"] == "running" and stored["pid"] and stored["pid"] != os.getpid() and alive(stored["pid"]):
        raise SpecError(f"sweep {sweep_id} is still running (pid {stored['pid']}): stop it first, or let it finish")
    public = plan.public()
    for key in ("load", "repeats"):
        if stored["plan"].get(key) != public[key]:
            raise SpecError(
                f"the plan's {key} differs from sweep {sweep_id}'s: its cells are numbered by that, so resuming "
                "would mix two loads; start a new sweep"
            )
    if set(stored["plan"].get("variants", {})) != set(public["variants"]):
        raise SpecError(
            f"the plan's variants differ from sweep {sweep_id}'s ({', '.join(stored['plan'].get('variants', {}))}): "
            "start a new sweep"
        )
    fingerprints = stored["plan"].get("fingerprints", {})
    for variant in plan.variants:
        old = fingerprints.get(variant)
        if old is not None and old != plan.fingerprint(variant):
            raise SpecError(
                f"variant {variant!r} launches something else than in sweep {sweep_id}: its cells would mix two "
                "configurations; start a new sweep, or rename the variant"
            )
    stop_leftovers(db, sweep_id)
    for cell in db.cells(sweep_id):
        if cell["state"] == "running":  # the sweep process died during this cell
            db.update_cell(cell["id"], state="incomplete", reason="the sweep stopped during this cell")
    db.update_sweep(sweep_id, state="running", reason=None, pid=os.getpid(), ended=None)
    return sweep_id


def stop_leftovers(db: Store, sweep_id: int, why: str = "the sweep stopped during this attempt") -> None:
    """Stop every engine this sweep started that still runs (a killed sweep leaves its last one behind), and
    close the attempts it left undecided."""
    for attempt in db.attempts(sweep_id):
        launch = Launch(db, attempt["launch_id"]) if attempt["launch_id"] is not None else None
        # a launch still starting may not have an engine yet: `down` waits for its watcher to record one
        try:
            if launch is not None and (launch.running or launch.state == LaunchState.STARTING):
                launch.down()
                db.update_attempt(attempt["id"], state="stopped", ended=time.time())
            elif attempt["state"] in ("checking", "starting"):
                db.update_attempt(attempt["id"], state="abandoned", reason=why, ended=time.time())
        except StoreError:
            continue  # the engine was signalled by down; the record waits for a store that can be written


def _died(launch: Launch) -> bool:
    """The engine's main process is gone (its workers, in other process groups, may linger a moment: `down`
    takes them), or nothing of it runs."""
    pid = launch.record.pid
    return not launch.running or (pid is not None and not alive(pid))


def _why(e: BaseException) -> str:
    if isinstance(e, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    return f"{type(e).__name__}: {e}"


__all__ = ["Campaign", "SweepOutcome", "run_sweep"]
