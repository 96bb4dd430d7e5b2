"""Every request into the store as it completes: a writer thread commits them in small batches.

The event loop only appends finished records to a deque; a thread with its own SQLite connection wakes
every 50 ms and commits what has arrived, so a crash loses at most that much and the loop never waits on
the disk. The thread is not woken per record: at C=1024 a thousand requests end within a few milliseconds,
and a wake-up for each made the two threads trade the GIL (and, on a client pinned to one core, the core)
a thousand times just when the loop had the most to do. `close()` flushes everything (Ctrl-C and a dead
server included).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import Path
from typing import TypeVar

from firstlight.errors import StoreError
from firstlight.records import RequestRecord
from firstlight.store import Store

FLUSH_S = 0.05
_T = TypeVar("_T")


class Clock:
    """Maps the client's monotonic clock to wall-clock seconds, fixed once per run."""

    def __init__(self) -> None:
        self.wall0 = time.time()
        self.perf0 = time.perf_counter()

    def wall(self, perf: float) -> float:
        return self.wall0 + (perf - self.perf0) if perf else 0.0


class RecordWriter:
    def __init__(self, store_path: Path, clock: Clock) -> None:
        self.store_path, self.clock = store_path, clock
        self._pending: deque[tuple[int, RequestRecord]] = deque()  # appended by the loop, no lock taken
        self._asks: deque[threading.Event | None] = deque()  # a flush's event, or None to close
        self._woken = threading.Event()
        self.error: str | None = None  # why records can no longer be committed (the level must stop)
        self._thread = threading.Thread(target=self._run, name="record-writer", daemon=True)
        self._thread.start()

    def put(self, level_id: int, rec: RequestRecord) -> None:
        self._pending.append((level_id, rec))

    def flush(self, timeout: float = 30.0) -> None:
        """Return once every record handed over so far is committed."""
        done = threading.Event()
        self._ask(done)
        done.wait(timeout)

    def close(self) -> None:
        self._ask(None)
        self._thread.join()

    def _ask(self, what: threading.Event | None) -> None:
        self._asks.append(what)
        self._woken.set()

    def _run(self) -> None:
        store = Store(self.store_path)
        try:
            stop = False
            while not stop:
                self._woken.wait(FLUSH_S)
                self._woken.clear()
                # The asks first: every record put before an ask is then in the batch taken below.
                asks = _drain(self._asks)
                batch = _drain(self._pending)
                if batch and self.error is None:
                    try:
                        store.add_requests(batch, self.clock.wall)
                    except StoreError as e:  # a full disk: what was committed stays; nothing more can be
                        self.error = str(e)
                for ask in asks:
                    if ask is None:
                        stop = True
                    else:
                        ask.set()
        finally:
            store.close()


def _drain(items: deque[_T]) -> list[_T]:
    """What the deque holds now; other threads may go on appending."""
    out = []
    for _ in range(len(items)):
        out.append(items.popleft())
    return out
