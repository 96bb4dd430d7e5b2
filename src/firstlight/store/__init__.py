"""The store: SQLite in WAL mode, so a watcher writes while `status`, `watch` and `logs` read.

Every event is committed as it happens; a process that dies half-way leaves a readable store.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from firstlight.errors import StoreError
from firstlight.records import RequestRecord
from firstlight.store.schema import ADDED_COLUMNS, SCHEMA
from firstlight.store.sweeps import SweepRecords

DEFAULT_STORE = Path("~/.firstlight/firstlight.db")


class LaunchState(str, Enum):
    """`starting` until the watcher decides (`ready`, `stalled`, `failed`); a ready launch may later become
    `exited` (the engine ended) or `stopped` (by `down`)."""

    STARTING = "starting"
    READY = "ready"
    STALLED = "stalled"
    FAILED = "failed"
    STOPPED = "stopped"
    EXITED = "exited"

    def __str__(self) -> str:
        return self.value

    @property
    def decided(self) -> bool:
        """The watcher has said how the start went (a stalled engine may still be running)."""
        return self is not LaunchState.STARTING


@dataclass
class LaunchRecord:
    """A launch as stored: what was started, where it stands, and why it ended."""

    id: int
    deployment_id: int
    name: str
    engine: str
    spec: dict[str, Any]
    created: float
    state: LaunchState
    phase: str
    url: str
    log_path: str
    argv: list[str]
    pid: int | None
    pgid: int | None
    watcher_pid: int | None
    leader_start: float | None  # when the engine's group leader started: a reused pgid is not ours
    ended: float | None
    exit_code: int | None
    reason: str | None
    diagnosis: dict[str, Any] | None


@dataclass
class Event:
    id: int
    launch_id: int
    ts: float
    kind: str
    phase: str | None
    data: dict[str, Any]


class _Connection(sqlite3.Connection):
    """A statement that fails (a full disk, a file gone, a store left locked) raises StoreError naming the
    store, so every command ends with one line about it rather than a traceback."""

    store_path: Path

    def _failed(self, e: sqlite3.Error) -> StoreError:
        return StoreError(f"the store {getattr(self, 'store_path', '')} cannot be used: {e}")

    def execute(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().execute(*args, **kwargs)
        except sqlite3.Error as e:
            raise self._failed(e) from e

    def executemany(self, *args: Any, **kwargs: Any) -> sqlite3.Cursor:
        try:
            return super().executemany(*args, **kwargs)
        except sqlite3.Error as e:
            raise self._failed(e) from e

    def commit(self) -> None:
        try:
            super().commit()
        except sqlite3.Error as e:
            raise self._failed(e) from e


class Store(SweepRecords):
    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path or os.environ.get("FIRSTLIGHT_STORE") or DEFAULT_STORE).expanduser()
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not self.path.exists():  # readable by its owner only; SQLite gives its -wal and -shm the same mode
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))
            self.db = sqlite3.connect(
                self.path, timeout=30, isolation_level=None, check_same_thread=False, factory=_Connection
            )
            self.db.store_path = self.path
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.executescript(SCHEMA)
            self._migrate()
        except (OSError, sqlite3.Error, StoreError) as e:  # not a SQLite file, no permission, a full disk
            cause = e.__cause__ if isinstance(e, StoreError) and e.__cause__ else e
            raise StoreError(f"cannot open the store {self.path}: {cause}") from e

    @classmethod
    def open(cls, store: Store | Path | str | None = None) -> Store:
        """A store given as itself, as a path, or not at all (the default store)."""
        return store if isinstance(store, Store) else cls(store)

    def _migrate(self) -> None:
        """Columns added after a store was created (SQLite adds them in place; old rows read as NULL)."""
        for table, column, kind in ADDED_COLUMNS:
            have = {row["name"] for row in self.db.execute(f"PRAGMA table_info({table})")}
            if column not in have:
                self.db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    def close(self) -> None:
        self.db.close()

    # deployments and launches

    def add_launch(self, name: str, engine: str, spec: dict[str, Any], url: str, log_path: str) -> int:
        now = time.time()
        with self.db:
            dep = self.db.execute(
                "INSERT INTO deployments(name, engine, spec, created) VALUES (?,?,?,?)",
                (name, engine, json.dumps(spec), now),
            ).lastrowid
            return int(
                self.db.execute(
                    "INSERT INTO launches(deployment_id, created, state, phase, url, log_path) VALUES (?,?,?,?,?,?)",
                    (dep, now, LaunchState.STARTING.value, "process_start", url, log_path),
                ).lastrowid
            )

    def update_launch(self, launch_id: int, unless: LaunchState | None = None, **fields: Any) -> None:
        """Set fields of a launch; with `unless`, only while its state is not that one (checked in the same
        statement, so a state another process wrote in the meantime is never overwritten)."""
        if not fields:
            return
        for key in ("argv", "diagnosis"):
            if key in fields and not isinstance(fields[key], str | None):
                fields[key] = json.dumps(fields[key])
        if isinstance(fields.get("state"), LaunchState):
            fields["state"] = fields["state"].value
        cols = ", ".join(f"{k} = ?" for k in fields)
        where, args = ("id = ? AND state != ?", (launch_id, unless.value)) if unless else ("id = ?", (launch_id,))
        self.db.execute(f"UPDATE launches SET {cols} WHERE {where}", (*fields.values(), *args))

    def get_launch(self, launch_id: int) -> LaunchRecord | None:
        row = self.db.execute(_LAUNCH_SELECT + " WHERE l.id = ?", (launch_id,)).fetchone()
        return _launch(row) if row else None

    def latest_launch(self) -> LaunchRecord | None:
        row = self.db.execute(_LAUNCH_SELECT + " ORDER BY l.id DESC LIMIT 1").fetchone()
        return _launch(row) if row else None

    def launches(self, limit: int = 20) -> list[LaunchRecord]:
        rows = self.db.execute(_LAUNCH_SELECT + " ORDER BY l.id DESC LIMIT ?", (limit,)).fetchall()
        return [_launch(r) for r in rows]

    # events

    def add_event(
        self, launch_id: int, kind: str, phase: str | None = None, ts: float | None = None, **data: Any
    ) -> int:
        return int(
            self.db.execute(
                "INSERT INTO events(launch_id, ts, kind, phase, data) VALUES (?,?,?,?,?)",
                (launch_id, ts if ts is not None else time.time(), kind, phase, json.dumps(data)),
            ).lastrowid
        )

    def events(self, launch_id: int, after_id: int = 0, kinds: tuple[str, ...] = ()) -> list[Event]:
        sql = "SELECT * FROM events WHERE launch_id = ? AND id > ?"
        params: list[Any] = [launch_id, after_id]
        if kinds:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            params += list(kinds)
        rows = self.db.execute(sql + " ORDER BY id", params).fetchall()
        return [
            Event(r["id"], r["launch_id"], r["ts"], r["kind"], r["phase"], json.loads(r["data"] or "{}")) for r in rows
        ]

    # benchmark runs, levels and requests

    def add_run(self, label: str, url: str, model: str, config: dict[str, Any], launch_id: int | None) -> int:
        return int(
            self.db.execute(
                "INSERT INTO bench_runs(created, label, url, model, config, state, launch_id) VALUES (?,?,?,?,?,?,?)",
                (time.time(), label, url, model, json.dumps(config), "running", launch_id),
            ).lastrowid
        )

    def update_run(self, run_id: int, **fields: Any) -> None:
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE bench_runs SET {cols} WHERE id = ?", (*fields.values(), run_id))

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM bench_runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        run = dict(row)
        run["config"] = json.loads(run["config"])
        return run

    def latest_run(self) -> dict[str, Any] | None:
        row = self.db.execute("SELECT id FROM bench_runs ORDER BY id DESC LIMIT 1").fetchone()
        return self.get_run(row["id"]) if row else None

    def add_level(self, run_id: int, idx: int, concurrency: int | None, rate: float | None) -> int:
        return int(
            self.db.execute(
                "INSERT INTO bench_levels(run_id, idx, concurrency, request_rate, state, started) VALUES (?,?,?,?,?,?)",
                (run_id, idx, concurrency, rate, "running", time.time()),
            ).lastrowid
        )

    def update_level(self, level_id: int, **fields: Any) -> None:
        for key in ("summary", "spec_decode", "client"):
            if key in fields and not isinstance(fields[key], str | None):
                fields[key] = json.dumps(fields[key])
        cols = ", ".join(f"{k} = ?" for k in fields)
        self.db.execute(f"UPDATE bench_levels SET {cols} WHERE id = ?", (*fields.values(), level_id))

    def levels(self, run_id: int) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM bench_levels WHERE run_id = ? ORDER BY idx, id", (run_id,)).fetchall()
        out = []
        for row in rows:
            level = dict(row)
            for key in ("summary", "spec_decode", "client"):
                level[key] = json.loads(level[key]) if level[key] else None
            out.append(level)
        return out

    def add_requests(self, records: Iterable[tuple[int, RequestRecord]], wall: Callable[[float], float]) -> None:
        """(level id, record) pairs in one transaction; `wall` maps the client's clock to wall-clock seconds."""
        self.db.execute("BEGIN")
        try:
            self.db.executemany(
                "INSERT INTO bench_requests(level_id, idx, warmup, scheduled, sent, done, status, error_kind, "
                "error, prompt_tokens, completion_tokens, chunks, chunk_tokens, perf_sent) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                [_request_row(level_id, rec, wall) for level_id, rec in records],
            )
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def requests(self, level_id: int) -> list[RequestRecord]:
        """A level's requests in the order they were stored, times on the wall clock."""
        rows = self.db.execute("SELECT * FROM bench_requests WHERE level_id = ? ORDER BY id", (level_id,))
        return [_request(row) for row in rows]


def _request_row(level_id: int, rec: RequestRecord, wall: Callable[[float], float]) -> tuple[Any, ...]:
    # Chunk times go in as the client's own clock readings (a C-level copy): this runs in the benchmark's
    # writer thread, and any per-chunk Python work here would hold the GIL away from its event loop.
    return (
        level_id,
        rec.index,
        int(rec.warmup),
        wall(rec.scheduled),
        wall(rec.sent),
        wall(rec.done),
        rec.status,
        rec.error_kind,
        rec.error,
        rec.prompt_tokens,
        rec.completion_tokens,
        rec.chunks.tobytes(),
        rec.chunk_tokens.tobytes(),
        rec.sent,
    )


def _request(row: sqlite3.Row) -> RequestRecord:
    """A stored request on a wall-clock time base (only differences matter to the metrics)."""
    rec = RequestRecord(
        row["idx"],
        row["scheduled"] or 0.0,
        sent=row["sent"] or 0.0,
        done=row["done"] or 0.0,
        status=row["status"] or 0,
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        error_kind=row["error_kind"],
        error=row["error"],
        warmup=bool(row["warmup"]),
    )
    times = array("d")
    times.frombytes(row["chunks"] or b"")
    # client clock → wall clock; rows written before perf_sent existed hold offsets from the send
    shift = rec.sent - row["perf_sent"] if row["perf_sent"] is not None else rec.sent
    rec.chunks = array("d", (t + shift for t in times))
    rec.chunk_tokens.frombytes(row["chunk_tokens"] or b"")
    return rec


_LAUNCH_SELECT = (
    "SELECT l.*, d.name AS name, d.engine AS engine, d.spec AS spec FROM launches l "
    "JOIN deployments d ON d.id = l.deployment_id"
)


def _launch(row: sqlite3.Row) -> LaunchRecord:
    return LaunchRecord(
        id=row["id"],
        deployment_id=row["deployment_id"],
        name=row["name"],
        engine=row["engine"],
        spec=json.loads(row["spec"]),
        created=row["created"],
        state=LaunchState(row["state"]),
        phase=row["phase"],
        url=row["url"],
        log_path=row["log_path"],
        argv=json.loads(row["argv"] or "[]"),
        pid=row["pid"],
        pgid=row["pgid"],
        watcher_pid=row["watcher_pid"],
        leader_start=row["leader_start"],
        ended=row["ended"],
        exit_code=row["exit_code"],
        reason=row["reason"],
        diagnosis=json.loads(row["diagnosis"]) if row["diagnosis"] else None,
    )
