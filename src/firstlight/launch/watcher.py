"""The watcher: starts the engine, turns its log, its exit and HTTP probes into events, and decides.

ready   the engine's readiness rule passed and one token was generated;
stalled the current phase made no progress for longer than its allowance;
failed  the engine exited before ready, or a fatal line appeared and the engine did not recover.

Everything is written to the store as it happens. The log is read as it grows (every 50 ms at
most), the engine's exit is noticed the moment `waitpid` returns, and probes are woken by the
log's "listening" lines rather than by a fixed interval.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from firstlight.deployment import Deployment
from firstlight.diagnosis import diagnose_file
from firstlight.engines import get_engine
from firstlight.launch import systemd
from firstlight.launch.probe import ProbeResult, ReadinessProber, check_health
from firstlight.launch.supervisor import process_start_time, start_engine, stop_group
from firstlight.logs import PHASE_INDEX, LogFollower
from firstlight.nvml import Nvml
from firstlight.secrets import redact_argv, redact_text
from firstlight.store import LaunchState, Store

TICK_S = 0.05
FATAL_GRACE_S = 5.0  # after a fatal line, how long the engine gets to exit by itself
GPU_SAMPLE_S = 1.0
GPU_SAMPLE_READY_S = 10.0
HEALTH_EVERY_S = 5.0  # once ready, the health path is asked this often
HEALTH_FAILURES = 3  # in a row, after ready: the server has stopped answering (stalled)


@dataclass
class _State:
    phase: str = "process_start"
    outcome: LaunchState = LaunchState.STARTING
    last_progress: float = field(default_factory=time.monotonic)
    fatal_at: float | None = None
    fatal_line: str | None = None
    stalled: bool = False
    last_health: float = 0.0
    health_pending: bool = False
    health_failures: int = 0


class Watcher:
    def __init__(self, store: Store, launch_id: int, dep: Deployment) -> None:
        self.store = store
        self.launch_id = launch_id
        self.dep = dep
        self.adapter = get_engine(dep.engine)
        launch = store.get_launch(launch_id)
        assert launch is not None
        self.log_path = Path(launch.log_path)
        self.machine = self.adapter.machine()
        self.state = _State()
        self.inbox: queue.Queue[tuple[str, Any]] = queue.Queue()
        self.nvml = Nvml()

    # events

    def event(self, kind: str, phase: str | None = None, **data: Any) -> None:
        # the engine's lines go into the store: an engine that prints its arguments prints its secrets
        data = {k: redact_text(v) if isinstance(v, str) else v for k, v in data.items()}
        self.store.add_event(self.launch_id, kind, phase, **data)

    def set_state(self, outcome: LaunchState, **fields: Any) -> None:
        """The watcher's verdict, never over `down`'s: a stopped launch stays stopped even when the engine, woken
        to be stopped (a SIGSTOPped one gets SIGCONT), prints one more line before it goes."""
        if isinstance(fields.get("reason"), str):
            fields["reason"] = redact_text(fields["reason"])
        self.state.outcome = outcome
        self.store.update_launch(self.launch_id, unless=LaunchState.STOPPED, state=outcome, **fields)

    # threads feeding the inbox

    def _wait_exit(self, proc) -> None:  # type: ignore[no-untyped-def]
        code = proc.wait()
        self.inbox.put(("exit", code))

    def _sample_gpus(self, stop: threading.Event) -> None:
        # every second while starting; once serving, a sample every 10 s is enough for `status`
        while not stop.wait(GPU_SAMPLE_S if self.state.outcome != LaunchState.READY else GPU_SAMPLE_READY_S):
            mem = self.nvml.memory()
            if mem:
                self.inbox.put(("gpu", [m.__dict__ for m in mem]))

    # the loop

    def run(self, attach: bool = False) -> LaunchState:
        """Start the engine and watch it to a decision; with `attach`, take over an engine already running
        (its watcher died): its exit is polled for, and the log so far is replayed without new events."""
        journal = None
        if attach:
            pgid = self._attach()
        elif self.dep.supervisor == "systemd":
            journal, pgid = self._start_unit()
        else:
            if self._stopped():
                return LaunchState.STOPPED  # `down` came before the engine was started
            started = start_engine(self.dep, self.adapter, self.log_path)
            pgid = started.pid  # start_new_session makes the engine its own group leader
            self.store.update_launch(
                self.launch_id,
                pid=started.pid,
                pgid=pgid,
                leader_start=process_start_time(started.pid),
                argv=redact_argv(started.argv),
                watcher_pid=os.getpid(),
            )
            if self._stopped():  # `down` raced the start: it saw no engine yet, so stop it here
                stop_group(pgid, grace=5)
                return LaunchState.STOPPED
            self.event("phase", "process_start", entered=True, pid=started.pid, argv=redact_argv(started.argv))
            threading.Thread(target=self._wait_exit, args=(started.proc,), daemon=True).start()
        stop_sampling = threading.Event()
        if self.nvml.available:
            threading.Thread(target=self._sample_gpus, args=(stop_sampling,), daemon=True).start()
        prober = ReadinessProber(
            self.dep.url,
            self.adapter.health_path,
            self.adapter.request_model(self.dep),
            self.dep.probe_timeout,
            lambda r: self.inbox.put(("probe", r)),
            self.adapter.api_key(self.dep),
        )
        prober.start()
        follower = LogFollower(self.log_path)
        if attach:
            for line_no, line in follower.read_available():
                ev = self.machine.feed(line, line_no)
                if ev is not None and ev.entered and not ev.aside:
                    self.state.phase = ev.phase
            if PHASE_INDEX[self.state.phase] >= PHASE_INDEX["http_listening"]:
                prober.hint()
        try:
            return self._loop(follower, prober, pgid)
        finally:
            prober.stop()
            stop_sampling.set()
            follower.close()
            self.nvml.close()
            if journal is not None:
                journal.terminate()

    def _stopped(self) -> bool:
        launch = self.store.get_launch(self.launch_id)
        return launch is not None and launch.state == LaunchState.STOPPED

    def _attach(self) -> int:
        launch = self.store.get_launch(self.launch_id)
        assert launch is not None and launch.pid is not None and launch.pgid is not None
        self.store.update_launch(
            self.launch_id, watcher_pid=os.getpid(), state=LaunchState.STARTING, reason=None, ended=None
        )
        self.event("reattached", launch.phase, watcher_pid=os.getpid())
        pid, started = launch.pid, launch.leader_start
        threading.Thread(target=self._poll_exit, args=(pid, started), daemon=True).start()
        return launch.pgid

    def _poll_exit(self, pid: int, started: float | None) -> None:
        # not our child: no exit status to wait for, only its absence (or a zombie, or another process
        # under its number) to notice
        while True:
            try:
                proc = psutil.Process(pid)
                gone = proc.status() == psutil.STATUS_ZOMBIE or (
                    started is not None and abs(proc.create_time() - started) > 0.01
                )
            except psutil.Error:
                gone = True
            if gone:
                break
            time.sleep(TICK_S)
        self.inbox.put(("exit", None))

    def _start_unit(self) -> tuple[Any, int]:
        """The systemd supervisor: install and start the unit, copy its journal into the log, and report
        the unit's end as the engine's exit."""
        unit = systemd.install(self.dep, f"launch {self.launch_id}")
        journal = systemd.follow_journal(unit.name, self.log_path)
        main_pid = int(systemd.state(unit.name).get("MainPID") or 0)
        self.store.update_launch(
            self.launch_id,
            pid=main_pid or None,
            pgid=main_pid or None,
            argv=["systemctl", "start", f"{unit.name}.service"],
            watcher_pid=os.getpid(),
        )
        self.event("phase", "process_start", entered=True, pid=main_pid, unit=unit.name, unit_file=str(unit.path))
        threading.Thread(target=lambda: self.inbox.put(("exit", systemd.wait_for_end(unit.name))), daemon=True).start()
        return journal, main_pid

    def _loop(self, follower: LogFollower, prober: ReadinessProber, pgid: int) -> LaunchState:
        while True:
            for line_no, line in follower.read_available():
                self._on_line(line_no, line, prober)
            try:
                kind, payload = self.inbox.get(timeout=TICK_S)
            except queue.Empty:
                kind, payload = "tick", None
            if kind == "exit":
                for line_no, line in follower.flush():
                    self._on_line(line_no, line, prober)
                return self._on_exit(payload, pgid)
            if kind == "probe":
                self._on_probe(payload)
            elif kind == "gpu":
                self.event("gpu", self.state.phase, gpus=payload)
            elif kind == "health":
                self._on_health(payload)
            self._check_deadlines(pgid)
            if self.state.outcome == LaunchState.FAILED:
                return LaunchState.FAILED

    def _on_line(self, line_no: int, line: str, prober: ReadinessProber) -> None:
        if self.adapter.ready_line and self.adapter.ready_line.search(line):
            prober.hint()
        ev = self.machine.feed(line, line_no)
        if ev is not None:
            self.state.last_progress = time.monotonic()
            if self.state.stalled:
                self.state.stalled = False
                self.set_state(LaunchState.STARTING)
                self.event("resumed", ev.phase)
            if ev.entered and not ev.aside:
                self.state.phase = ev.phase
                self.store.update_launch(self.launch_id, phase=ev.phase)
                if PHASE_INDEX[ev.phase] >= PHASE_INDEX["http_listening"]:
                    prober.hint()
            self.event(
                "phase" if ev.entered else "progress",
                ev.phase,
                entered=ev.entered,
                aside=ev.aside,
                line_no=line_no,
                line=line[:500],
                log_time=ev.log_time,
                progress=ev.progress,
            )
        if self.state.fatal_at is None and self.state.outcome != LaunchState.READY and self.adapter.is_fatal(line):
            self.state.fatal_at = time.monotonic()
            self.state.fatal_line = line
            self.event("fatal_line", self.state.phase, line_no=line_no, line=line[:500])

    @property
    def machine_ready(self) -> bool:
        return self.state.phase == "ready"

    def _on_probe(self, result: ProbeResult) -> None:
        if not result.ok:
            self.event(
                "probe",
                self.state.phase,
                ok=False,
                stage=result.stage,
                detail=result.detail,
                status=result.status,
            )
            return
        if self.state.outcome == LaunchState.READY:
            return
        self.machine.advance("ready")
        self.state.phase = "ready"
        self.store.update_launch(self.launch_id, phase="ready")
        self.event(
            "phase",
            "ready",
            entered=True,
            detail=result.detail,
            token=result.token,
            latency_s=result.latency_s,
        )
        self.set_state(LaunchState.READY)

    def _ask_health(self) -> None:
        with httpx.Client(trust_env=False) as client:
            self.inbox.put(("health", check_health(client, self.dep.url, self.adapter.health_path)))

    def _on_health(self, result: ProbeResult) -> None:
        """After ready: a server that stops answering its health path is stalled (a SIGSTOP, a wedged
        scheduler); one that answers again is ready again."""
        st = self.state
        st.health_pending = False
        if self._stopped():  # `down` is stopping it: no longer ours to judge
            return
        if result.ok:
            st.health_failures = 0
            if st.outcome == LaunchState.STALLED and st.stalled:
                st.stalled = False
                self.set_state(LaunchState.READY, reason=None)
                self.event("resumed", "ready", detail=result.detail)
            return
        st.health_failures += 1
        if st.health_failures == HEALTH_FAILURES and st.outcome == LaunchState.READY:
            st.stalled = True
            reason = f"stopped answering {self.adapter.health_path} after it was ready ({result.detail})"
            self.set_state(LaunchState.STALLED, reason=reason)
            self.event("stalled", "ready", reason=reason)

    def _check_deadlines(self, pgid: int) -> None:
        st = self.state
        now = time.monotonic()
        served = st.outcome == LaunchState.READY or (st.outcome == LaunchState.STALLED and self.machine_ready)
        if served and not st.health_pending and now - st.last_health >= HEALTH_EVERY_S:
            st.health_pending, st.last_health = True, now
            threading.Thread(target=self._ask_health, daemon=True).start()
        if st.fatal_at is not None and st.outcome == LaunchState.STARTING and now - st.fatal_at > FATAL_GRACE_S:
            self._fail(f"fatal error in the log: {st.fatal_line}", None, pgid)
            return
        if st.outcome != LaunchState.STARTING or st.stalled:
            return
        allowance = self.dep.stall_allowance(st.phase)
        if allowance is not None and now - st.last_progress > allowance:
            st.stalled = True
            reason = (
                f"stalled in {st.phase}: no progress for {now - st.last_progress:.1f} s (allowance {allowance:g} s)"
            )
            diagnosis = diagnose_file(self.log_path, self.adapter.name)
            self.set_state(LaunchState.STALLED, reason=reason, diagnosis=diagnosis.to_dict())
            self.event("stalled", st.phase, reason=reason, allowance=allowance)

    def _on_exit(self, code: int | None, pgid: int) -> LaunchState:
        self.event("exit", self.state.phase, exit_code=code)
        launch = self.store.get_launch(self.launch_id)
        if launch is not None and launch.state == LaunchState.STOPPED:
            self.store.update_launch(self.launch_id, exit_code=code, ended=time.time())
            stop_group(pgid, grace=5)
            return LaunchState.STOPPED
        if self.state.outcome == LaunchState.READY:
            self.set_state(
                LaunchState.EXITED,
                exit_code=code,
                ended=time.time(),
                reason=f"the engine exited {_code(code)} after it was ready",
            )
            stop_group(pgid, grace=5)
            return LaunchState.EXITED
        self._fail(f"the engine exited {_code(code)} during {self.state.phase}", code, pgid)
        return LaunchState.FAILED

    def _fail(self, reason: str, code: int | None, pgid: int) -> None:
        decided = time.time()
        diagnosis = diagnose_file(self.log_path, self.adapter.name)
        # Orphaned workers of a failed launch still hold memory (GPU memory on a GPU host): they are stopped
        # before the launch is marked failed, so whoever waits for the verdict finds nothing left running.
        if self.dep.supervisor == "systemd":
            systemd.stop(systemd.unit_name(self.dep))
        survivors = stop_group(pgid, grace=5) if pgid else []
        if survivors:
            self.event("cleanup", self.state.phase, survivors=survivors)
        self.event("failed", self.state.phase, ts=decided, reason=reason, exit_code=code, diagnosis=diagnosis.to_dict())
        self.set_state(LaunchState.FAILED, reason=reason, exit_code=code, ended=decided, diagnosis=diagnosis.to_dict())


def _code(code: int | None) -> str:
    return f"with code {code}" if code is not None else "(its exit code unknown: it was watched after a re-attach)"
