"""Every request into the store as it completes: a writer thread commits them in small batches.

The event loop only puts finished records on a queue; a thread with its own SQLite connection
commits what has arrived every 50 ms, so a crash loses at most that much and the loop never waits
on the disk. `close()` flushes everything (Ctrl-C and a dead server included).
"""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path

from firstlight.errors import StoreError
from firstlight.records import RequestRecord
from firstlight.store import Store

FLUSH_S = 0.05


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
        self._queue: queue.Queue[tuple[int, RequestRecord] | threading.Event | None] = queue.Queue()
        self.error: str | None = None  # why records can no longer be committed (the level must stop)
        self._thread = threading.Thread(target=self._run, name="record-writer", daemon=True)
        self._thread.start()

    def put(self, level_id: int, rec: RequestRecord) -> None:
        self._queue.put((level_id, rec))

    def flush(self, timeout: float = 30.0) -> None:
        """Return once every record handed over so far is committed."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        store = Store(self.store_path)
        try:
            stop = False
            while not stop:
                batch: list[tuple[int, RequestRecord]] = []
                waiters: list[threading.Event] = []
                item = self._queue.get()
                deadline = time.monotonic() + FLUSH_S
                while True:
                    if item is None:
                        stop = True
                    elif isinstance(item, threading.Event):
                        waiters.append(item)
                    else:
                        batch.append(item)
                    if stop or waiters or time.monotonic() >= deadline:
                        break
                    try:
                        item = self._queue.get(timeout=max(deadline - time.monotonic(), 0))
                    except queue.Empty:
                        break
                if batch and self.error is None:
                    try:
                        store.add_requests(batch, self.clock.wall)
                    except StoreError as e:  # a full disk: what was committed stays; nothing more can be
                        self.error = str(e)
                for w in waiters:
                    w.set()
        finally:
            store.close()
