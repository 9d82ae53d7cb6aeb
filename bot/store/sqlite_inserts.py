"""SQLite: the write-behind batch's plain audit INSERTs straight through the sqlite3 driver, on the writer's
own thread.

Why: a fast turn's rows are one transaction of four executemany calls (turns, messages, llm_calls,
tool_invocations) of a few rows each, and SQLAlchemy's execute path around each (the compiled cache, the
parameter processing, the cursor result) was about half of the writer's CPU per turn (~1 of 1.9 ms in
benchmark 1). That thread shares the GIL with the event loop, and the turn waits for the batch at its end.

What stays SQLAlchemy's: the statement text (the INSERT compiled once per statement and columns), each value
through its column type's own bind processor (JSON, DateTime as SQLAlchemy stores them), the Python-side
column defaults (`with_defaults`, as for the PostgreSQL recordsets), the transaction (`conn.begin()` around
it), and the errors: a driver error comes out as SQLAlchemy's (`DBAPIError.instance`), so the writer still
tells a locked or missing file (waited out) from a refused row (written one by one)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import Connection, Table
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Insert

from bot.store.recordset import with_defaults

Plan = tuple[str, tuple[str, ...], tuple[Callable[[Any], Any] | None, ...]]  # SQL, parameter names, processors


class SqliteInserts:
    def __init__(self) -> None:
        self._plans: dict[tuple[Executable, tuple[str, ...]], Plan | None] = {}

    def run(self, conn: Connection, statement: Executable, rows: list[dict[str, Any]]) -> bool:
        """Execute a plain `insert(table)` for `rows` (all with the same keys); False if it is not one this can
        run (a key that is not a column), for the caller to execute the usual way."""
        if not isinstance(statement, Insert):
            return False
        table = cast(Table, statement.table)
        rows = with_defaults(table, rows)
        shape = (statement, tuple(rows[0]))
        if shape not in self._plans:
            self._plans[shape] = _plan(conn, statement, table, shape[1])
        plan = self._plans[shape]
        if plan is None:
            return False
        sql, names, processors = plan
        values = [tuple(row[n] if p is None else p(row[n]) for n, p in zip(names, processors, strict=True))
                  for row in rows]
        cursor = conn.connection.driver_connection.cursor()  # pyright: ignore[reportOptionalMemberAccess]
        try:
            cursor.executemany(sql, values)
        except sqlite3.Error as exc:
            raise DBAPIError.instance(sql, None, exc, sqlite3.Error) from exc
        finally:
            cursor.close()
        return True


def _plan(conn: Connection, statement: Insert, table: Table, keys: tuple[str, ...]) -> Plan | None:
    if any(key not in table.c for key in keys):
        return None
    dialect = conn.dialect
    compiled = statement.compile(dialect=dialect, column_keys=list(keys))
    names = tuple(compiled.positiontup or ())
    if sorted(names) != sorted(keys):  # a value SQLAlchemy would compute itself (none here): its way
        return None
    processors = tuple(table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names)
    return str(compiled), names, processors
