"""Idle keep-alive connections to one target, opened within the process's open-files budget.

A request takes an idle connection or opens one; past the budget it fails as a connection error, counted,
rather than the process running out of descriptors for its own store and summary.
"""

from __future__ import annotations

import asyncio
import resource
import time

from firstlight.benchmark import stamped
from firstlight.benchmark.client import CANCELLED, StreamConnection, Target
from firstlight.records import RequestRecord

RESERVED_FDS = 64  # descriptors kept for the store, its writer, imports and the level's summary


def connection_budget() -> int:
    """How many connections this process may hold: the open-files limit, raised to its hard ceiling where
    the soft one is lower (as the engines do), less what the rest of the benchmark needs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        want = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return max(soft - RESERVED_FDS, 1)


class ConnectionPool:
    """Idle keep-alive connections to one target; a request takes one, or opens a new one (within the
    open-files budget: past it a request fails as a connection error, counted, rather than the process
    running out of descriptors for its own store and summary)."""

    # uvicorn closes idle keep-alive connections after 5 s: never reuse one that may be closing.
    MAX_IDLE_S = 3.0

    def __init__(self, target: Target) -> None:
        self.target = target
        self._idle: list[StreamConnection] = []
        self._open: list[StreamConnection] = []
        self._opening = 0
        self.budget = connection_budget()

    async def _connect(self) -> StreamConnection:
        self._open = [c for c in self._open if not c.closed]
        if len(self._open) + self._opening >= self.budget:
            raise OSError(
                f"the open-files limit leaves no descriptor for another connection "
                f"(room for {self.budget}; raise it with ulimit -n)"
            )
        loop = asyncio.get_running_loop()
        self._opening += 1
        try:
            _, proto = await stamped.open_connection(self.target.host, self.target.port, lambda: StreamConnection(loop))
        finally:
            self._opening -= 1
        self._open.append(proto)
        return proto

    async def send(self, rec: RequestRecord, body: bytes, timeout: float) -> RequestRecord:
        """Send one request and wait for its whole stream; every failure ends in the record, never raises.
        Cancelled (Ctrl-C, a level told to stop at once), the record says so before CancelledError goes on,
        so the caller can still store it."""
        try:
            return await self._send(rec, body, timeout)
        except asyncio.CancelledError:
            rec.error_kind, rec.error = CANCELLED, "the run was interrupted before this request finished"
            rec.done = time.perf_counter()
            raise

    async def _send(self, rec: RequestRecord, body: bytes, timeout: float) -> RequestRecord:
        head = self.target.request_head(len(body))
        for attempt in (1, 2):
            conn = self._take()
            reused = conn is not None
            if conn is None:
                try:
                    conn = await self._connect()
                except OSError as e:
                    rec.sent = rec.sent or time.perf_counter()
                    rec.done = time.perf_counter()
                    kind = "connection_refused" if isinstance(e, ConnectionRefusedError) else "connection_error"
                    rec.error_kind, rec.error = kind, f"{type(e).__name__}: {e}"
                    return rec
            await conn.start(rec, head, body, timeout)
            # A reused connection the server closed just before our request: nothing was answered, so
            # sending again on a fresh connection is safe, once.
            if reused and attempt == 1 and rec.error_kind == "connection_reset" and not rec.chunks and not rec.status:
                rec.error_kind = rec.error = None
                rec.done = 0.0
                continue
            if not conn.closed and rec.error_kind is None:
                self._idle.append(conn)
            return rec
        return rec

    async def prewarm(self, n: int) -> int:
        """Open up to n idle connections before a level starts, so the level measures serving rather than
        the server's accept queue (a burst of new connections waits there before any request is read)."""
        wanted = max(n - len(self._idle), 0)
        results = await asyncio.gather(*(self._connect() for _ in range(wanted)), return_exceptions=True)
        opened = [c for c in results if isinstance(c, StreamConnection)]
        self._idle.extend(opened)
        return len(opened)

    def _take(self) -> StreamConnection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.MAX_IDLE_S:
                return conn
            if conn.transport is not None:
                conn.transport.close()
        return None

    def close(self) -> None:
        for conn in self._idle:
            if conn.transport is not None:
                conn.transport.close()
        self._idle.clear()
