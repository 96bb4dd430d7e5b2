"""One worker process of a level sent by several (`--workers`): its own uvloop event loop and connection
pool, its share of the level's requests, and every request sent to the parent the moment it finishes.

Started with the "spawn" method, never forked: the parent holds a writer thread and a running event loop.
One socket pair to the parent carries small messages (`wire`):

    parent → worker   ("go", start)   every worker is ready: begin at `start` (a perf_counter instant)
                      ("stop",)       send nothing more; let the requests in flight finish
                      ("cancel",)     cancel the requests in flight too (Ctrl-C); the parent gone: alike
    worker → parent   ("ready", n)    n connections opened ahead of the level
                      ("beat",)       every HEARTBEAT_S, from the start to the end: still here
                      ("record", r)   one finished request (`wire.pack`)
                      ("end", h)      last: the worker's health over the level (None if it never began)

Ctrl-C at a terminal reaches the whole process group: a worker ignores it, the parent decides and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from dataclasses import dataclass
from typing import Any

import uvloop

from firstlight.benchmark import schedule
from firstlight.benchmark.client import Target
from firstlight.benchmark.failures import FailureRun
from firstlight.benchmark.health import ClientWatch
from firstlight.benchmark.pool import ConnectionPool
from firstlight.benchmark.wire import Channel, Message, open_channel, pack
from firstlight.records import RequestRecord

SETTLE_S = 0.2  # after opening connections: connected is not yet accepted by the server
HEARTBEAT_S = 0.5  # the parent takes a worker silent for many of these as stopped (fleet.SILENCE_S)
FLUSH_TIMEOUT_S = 30.0  # at the end, for the parent to take what is still queued for it


@dataclass(frozen=True)
class WorkerJob:
    """Everything one worker needs, pickled once when it starts."""

    worker: int  # its number in the level, from 0
    target: Target
    timeout: float  # seconds per request
    indices: list[int]
    bodies: dict[int, bytes]  # the request body of each of its indexes
    streams: int | None  # closed loop: requests in flight; open loop: its part of the cap (None: none)
    offsets: list[float] | None  # open loop: each index's arrival, seconds from the start; None: closed loop
    duration: float | None  # seconds from the start after which nothing more is sent
    prewarm: int  # connections to open before the level


def main(job: WorkerJob, sock: socket.socket) -> None:
    """The process's entry point."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    uvloop.run(_work(job, sock))


class Parent:
    """The parent as the worker sees it: its orders as they arrive, and what is told back."""

    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.stop = asyncio.Event()  # no new requests
        self.start: asyncio.Future[float | None] = asyncio.get_running_loop().create_future()
        self.running: asyncio.Task[None] | None = None  # the level, cancelled on ("cancel",)

    def obey(self, order: Message) -> None:
        kind = order[0]
        if kind == "go" and not self.start.done():
            self.start.set_result(float(order[1]))
        elif kind in ("stop", "cancel"):
            self.stop.set()
        if kind == "cancel":
            if not self.start.done():
                self.start.set_result(None)
            if self.running is not None:
                self.running.cancel()

    def gone(self) -> None:
        """The pipe closed: the parent died, and nobody is left to store what this worker would send."""
        self.obey(("cancel",))

    def tell(self, message: Message) -> None:
        if self.channel is not None:
            self.channel.send(message)


async def _work(job: WorkerJob, sock: socket.socket) -> None:
    parent = Parent()
    parent.channel = await open_channel(sock, parent.obey, parent.gone)
    beats = asyncio.create_task(_beat(parent))
    pool = ConnectionPool(job.target)
    health: dict[str, Any] | None = None
    try:
        opened = await pool.prewarm(job.prewarm) if job.prewarm else 0
        if opened:
            await asyncio.sleep(SETTLE_S)
        parent.tell(("ready", opened))
        start = await parent.start
        if start is not None:
            health = await _level(job, parent, pool, start)
    finally:
        pool.close()
        beats.cancel()
    parent.tell(("end", health))
    await parent.channel.close(FLUSH_TIMEOUT_S)


async def _beat(parent: Parent) -> None:
    while True:
        parent.tell(("beat",))
        await asyncio.sleep(HEARTBEAT_S)


async def _level(job: WorkerJob, parent: Parent, pool: ConnectionPool, start: float) -> dict[str, Any]:
    """Send this worker's share from `start` on; returns its health over the level."""
    await asyncio.sleep(max(start - time.perf_counter(), 0.0))
    deadline = start + job.duration if job.duration else None
    sender = Sender(job, parent, pool)
    watch = ClientWatch()
    watch.start()
    if job.offsets is not None:
        level = schedule.open_loop(
            sender.one, job.indices, iter(job.offsets), job.streams, parent.stop, deadline, start=start
        )
    else:
        level = schedule.closed_loop(sender.one, job.indices, job.streams or 1, parent.stop, deadline)
    parent.running = asyncio.create_task(level)
    with contextlib.suppress(asyncio.CancelledError):
        await parent.running
    await watch.stop()
    return {"worker": job.worker, "pid": os.getpid(), "streams": job.streams, "requests": sender.sent, **watch.health()}


class Sender:
    """Sends one request and tells the parent how it ended; stops this worker against a dead server."""

    def __init__(self, job: WorkerJob, parent: Parent, pool: ConnectionPool) -> None:
        self.job, self.parent, self.pool = job, parent, pool
        self.failures = FailureRun(job.streams)
        self.sent = 0

    async def one(self, index: int, scheduled: float) -> None:
        rec = RequestRecord(index, scheduled)
        try:
            await self.pool.send(rec, self.job.bodies[index], self.job.timeout)
        except asyncio.CancelledError:
            self._report(rec)  # marked cancelled by the pool
            raise
        self._report(rec)
        if self.failures.see(rec) is not None:
            self.parent.stop.set()  # the parent, seeing the same records, says why and stops the others

    def _report(self, rec: RequestRecord) -> None:
        self.sent += 1
        self.parent.tell(("record", pack(rec)))
