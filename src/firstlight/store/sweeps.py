"""A sweep's rows: the sweep, every launch attempt of its variants, and every cell (variant × level ×
repeat) with the benchmark run that measured it. Each is written as it happens, so a sweep that dies
leaves a store that says what was done and what was not."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any


class SweepRecords:
    """The sweep tables' reads and writes; mixed into `Store`, which owns the connection."""

    db: sqlite3.Connection

    def add_sweep(self, name: str, plan: dict[str, Any], pid: int) -> int:
        return int(
            self.db.execute(
                "INSERT INTO sweeps(created, name, plan, state, pid) VALUES (?,?,?,?,?)",
                (time.time(), name, json.dumps(plan), "running", pid),
            ).lastrowid
        )

    def update_sweep(self, sweep_id: int, **fields: Any) -> None:
        _update(self.db, "sweeps", sweep_id, fields, ("plan",))

    def get_sweep(self, sweep_id: int) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM sweeps WHERE id = ?", (sweep_id,)).fetchone()
        return _decoded(row, ("plan",)) if row else None

    def find_sweep(self, name: str) -> dict[str, Any] | None:
        """The latest sweep of this name (None when there is none)."""
        row = self.db.execute("SELECT * FROM sweeps WHERE name = ? ORDER BY id DESC LIMIT 1", (name,)).fetchone()
        return _decoded(row, ("plan",)) if row else None

    def latest_sweep(self) -> dict[str, Any] | None:
        row = self.db.execute("SELECT * FROM sweeps ORDER BY id DESC LIMIT 1").fetchone()
        return _decoded(row, ("plan",)) if row else None

    def add_attempt(self, sweep_id: int, variant: str, attempt: int, rung: dict[str, Any]) -> int:
        return int(
            self.db.execute(
                "INSERT INTO sweep_attempts(sweep_id, variant, attempt, rung, state, started) VALUES (?,?,?,?,?,?)",
                (sweep_id, variant, attempt, json.dumps(rung), "checking", time.time()),
            ).lastrowid
        )

    def update_attempt(self, attempt_id: int, **fields: Any) -> None:
        _update(self.db, "sweep_attempts", attempt_id, fields, ("rung",))

    def attempts(self, sweep_id: int) -> list[dict[str, Any]]:
        rows = self.db.execute("SELECT * FROM sweep_attempts WHERE sweep_id = ? ORDER BY id", (sweep_id,))
        return [_decoded(row, ("rung",)) for row in rows]

    def add_cell(
        self, sweep_id: int, variant: str, level: int, concurrency: int | None, rate: float | None, repeat: int
    ) -> int:
        return int(
            self.db.execute(
                "INSERT INTO sweep_cells(sweep_id, variant, level, concurrency, request_rate, repeat, state, started) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (sweep_id, variant, level, concurrency, rate, repeat, "running", time.time()),
            ).lastrowid
        )

    def update_cell(self, cell_id: int, **fields: Any) -> None:
        _update(self.db, "sweep_cells", cell_id, fields, ())

    def cells(self, sweep_id: int) -> list[dict[str, Any]]:
        """Every execution of every cell, in the order they started (a resumed cell has several)."""
        rows = self.db.execute("SELECT * FROM sweep_cells WHERE sweep_id = ? ORDER BY id", (sweep_id,))
        return [dict(row) for row in rows]


def _update(
    db: sqlite3.Connection, table: str, row_id: int, fields: dict[str, Any], json_cols: tuple[str, ...]
) -> None:
    if not fields:
        return
    for key in json_cols:
        if key in fields and not isinstance(fields[key], str | None):
            fields[key] = json.dumps(fields[key])
    cols = ", ".join(f"{k} = ?" for k in fields)
    db.execute(f"UPDATE {table} SET {cols} WHERE id = ?", (*fields.values(), row_id))


def _decoded(row: sqlite3.Row, json_cols: tuple[str, ...]) -> dict[str, Any]:
    out = dict(row)
    for key in json_cols:
        out[key] = json.loads(out[key]) if out.get(key) else None
    return out
