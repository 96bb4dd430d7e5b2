"""A level sent by several worker processes (`--workers`), seen from the parent: it deals the shares,
starts the workers, gives them one start instant, and is the single writer of what they send. Every
finished request goes through the level's runner (the live counts, the rules that stop a level, the
record writer) exactly as one sent in this process does, so the store holds one merged stream.

Nothing a worker finished is lost: its records wait in the pipe until read, even after it dies. A worker
that dies ends the level early (the others are told to stop and finish what they have in flight), and so
does one that stops answering (stopped with SIGSTOP, or hung: no heartbeat for SILENCE_S), which is killed;
Ctrl-C cancels every worker's requests in flight and drains what they finished before it propagates.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from firstlight.benchmark import schedule, sharing, worker
from firstlight.benchmark.waiting import wait_set
from firstlight.benchmark.wire import Channel, Message, open_channel, unpack

if TYPE_CHECKING:
    from firstlight.benchmark.client import Target
    from firstlight.benchmark.config import BenchConfig, LevelSpec
    from firstlight.benchmark.levels import LevelRunner

START_MARGIN_S = 0.05  # from the last worker's "ready" to the common start: time for "go" to reach them all
READY_TIMEOUT_S = 120.0  # a worker that has not started by then will not
DRAIN_TIMEOUT_S = 10.0  # after "cancel": the workers' cancelled requests come back within milliseconds
JOIN_TIMEOUT_S = 5.0
SILENCE_S = 10 * worker.HEARTBEAT_S  # nothing from a worker for this long while the level runs: it is stopped
PREWARM_MAX = 4096


@dataclass
class Member:
    """One worker process as the parent sees it."""

    job: worker.WorkerJob
    process: BaseProcess
    sock: socket.socket  # the parent's end of the pair, until the channel takes it
    channel: Channel | None = None
    ready: bool = False
    ended: bool = False  # its pipe is closed: nothing more can come from it
    said_end: bool = False  # it finished normally (an "end" message)
    health: dict[str, Any] | None = None
    records: int = 0
    heard: float = field(default_factory=time.monotonic)  # its last message
    silenced: bool = False  # killed for not answering


@dataclass
class Fleet:
    """The workers of one level: `ready()` starts them, `run()` drives the level to the end, `health()` says how
    each fared."""

    runner: LevelRunner
    jobs: list[worker.WorkerJob]
    members: list[Member] = field(default_factory=list)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def ready(self) -> None:
        """Start the workers and wait until each has opened its connections and waits for the start (or has
        died, or not started in time: then `run` stops the level at once)."""
        self._start()
        try:
            for m in self.members:
                m.channel = await open_channel(m.sock, partial(self._take, m), partial(self._ended, m))
            await self._until(lambda: all(m.ready or m.ended for m in self.members), READY_TIMEOUT_S)
        except asyncio.CancelledError:
            await self._interrupt()
            self._close()
            raise

    async def run(self) -> None:
        """Start the ready workers together and take what they send until every pipe is closed; raises
        CancelledError (Ctrl-C) once the workers' finished requests are kept."""
        try:
            if self.runner.stop.is_set() or not all(m.ready for m in self.members):
                self.runner.abort(self.runner.abort_reason or "a worker process did not start in time")
                self._tell_all(("cancel",))
            else:
                start = time.perf_counter() + START_MARGIN_S
                self.runner.state.started = start
                self._tell_all(("go", start))
            await self._watching(lambda: self.runner.stop.is_set() or self._all_ended())
            if not self._all_ended():
                self._tell_all(("stop",))  # a dead server, a dead worker: finish what is in flight
                await self._watching(self._all_ended)
        except asyncio.CancelledError:
            await self._interrupt()
            raise
        finally:
            self._close()

    def health(self) -> list[dict[str, Any]]:
        """Each worker's own health, in order; one that died says how, and how many records it had sent."""
        out = []
        for m in self.members:
            if m.health is not None:
                out.append(m.health)
            else:  # stopped before the start, or died
                entry = {"worker": m.job.worker, "pid": m.process.pid, "streams": m.job.streams, "requests": m.records}
                how = f"stopped answering, then {_exit(m.process)}" if m.silenced else _exit(m.process)
                out.append({**entry, "started": False} if m.said_end else {**entry, "died": how})
        return out

    def _start(self) -> None:
        spawn = multiprocessing.get_context("spawn")  # never fork: this process has threads and a running loop
        for job in self.jobs:
            ours, theirs = socket.socketpair()
            process = spawn.Process(target=worker.main, args=(job, theirs), name=f"firstlight-worker-{job.worker}")
            process.daemon = True  # never outlives the parent
            process.start()
            theirs.close()  # the worker's end lives in the worker alone: its death closes the pipe
            self.members.append(Member(job, process, ours))

    def _all_ended(self) -> bool:
        """Nothing more will come from any worker: each said its last word, or its pipe closed."""
        return all(m.said_end or m.ended for m in self.members)

    async def _until(self, done: Callable[[], bool], timeout: float | None) -> None:
        """Wait (on the messages the channels bring) until `done()` holds, or the timeout runs out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not done():
            self._changed.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            if not await wait_set(self._changed, left):
                return

    async def _watching(self, done: Callable[[], bool]) -> None:
        """`_until(done)`, killing any worker that has gone silent: the level cannot wait on one that will
        never answer, and what it sent before is kept."""
        checked = time.monotonic()
        while not done():
            await self._until(done, worker.HEARTBEAT_S)
            now = time.monotonic()
            if now - checked > SILENCE_S / 2:
                # this process was not running either (the whole group stopped, Ctrl-Z then fg): the workers'
                # beats since are not read yet, so their silence says nothing
                for m in self.members:
                    m.heard = now
            checked = now
            for m in self.members:
                if not (m.ended or m.said_end or m.silenced) and now - m.heard > SILENCE_S:
                    self._silence(m, now - m.heard)

    def _silence(self, m: Member, quiet_s: float) -> None:
        m.silenced = True
        self.runner.abort(
            f"worker process {m.job.worker} (pid {m.process.pid}) stopped answering (nothing from it for "
            f"{quiet_s:.0f} s): killed"
        )
        m.process.kill()  # a stopped process dies too; its pipe then closes (`_ended`)

    def _take(self, m: Member, message: Message) -> None:
        m.heard = time.monotonic()
        kind = message[0]
        if kind == "record":
            m.records += 1
            self.runner.account(unpack(message[1]))
            if self.runner.stop.is_set():
                self._changed.set()  # the level must stop (a dead server, a full store): tell every worker
        elif kind == "ready":
            m.ready = True
            self._changed.set()
        elif kind == "end":
            m.said_end, m.health = True, message[1]
            self._changed.set()

    def _ended(self, m: Member) -> None:
        """A worker's pipe closed, after everything it sent: it ended, or died."""
        m.ended = True
        self._changed.set()
        if not m.said_end:
            m.process.join(1.0)  # its pipe closed as it died: it is gone, or all but
            how = _exit(m.process)
            self.runner.abort(f"worker process {m.job.worker} (pid {m.process.pid}) died ({how})")

    def _tell_all(self, order: Message) -> None:
        for m in self.members:
            if not m.ended and m.channel is not None:
                m.channel.send(order)

    async def _interrupt(self) -> None:
        """Ctrl-C: cancel every worker's requests in flight and take everything they send back (their finished
        requests, then each cancelled one), so the level's summary holds them all."""
        self._tell_all(("cancel",))
        await self._until(self._all_ended, DRAIN_TIMEOUT_S)

    def _close(self) -> None:
        """Every pipe closed and every worker process gone: each has said its last word or closed its end, so
        the join is short; one that has not is killed (nothing it could still send would be read)."""
        for m in self.members:
            if m.channel is None:
                m.sock.close()
            elif m.channel.transport is not None:
                m.channel.transport.close()  # the transport owns the socket now, and closes it
            m.process.join(JOIN_TIMEOUT_S if m.said_end or m.ended else 0.0)
            if m.process.is_alive():
                m.process.kill()
                m.process.join(JOIN_TIMEOUT_S)


def _exit(process: BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "still running"
    if code < 0:
        return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def jobs(
    cfg: BenchConfig, level: LevelSpec, indices: list[int], workers: int, bodies: list[bytes], target: Target
) -> list[worker.WorkerJob]:
    """Each worker's job for this level: its share (`sharing`), its bodies, the connections it opens first."""
    if level.rate is not None:
        arrivals = schedule.level_arrivals(cfg, level)  # as in one process
        shares = sharing.open_shares(indices, list(islice(arrivals, len(indices))), level.concurrency, workers)
    else:
        shares = sharing.closed_shares(indices, level.concurrency or 1, workers)
    uncapped_prewarm = -(-64 // max(len(shares), 1))  # an uncapped open loop: 64 in all, as in one process
    return [
        worker.WorkerJob(
            worker=w,
            target=target,
            timeout=cfg.timeout,
            indices=share.indices,
            bodies={i: bodies[i % len(bodies)] for i in share.indices},
            streams=share.streams,
            offsets=share.offsets,
            duration=cfg.duration,
            prewarm=min(share.streams or uncapped_prewarm, len(share.indices), PREWARM_MAX),
        )
        for w, share in enumerate(shares)
    ]
