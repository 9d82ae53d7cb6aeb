"""SQLite: the write-behind batch's plain audit INSERTs, and the claims' and new sessions'
`INSERT ... ON CONFLICT DO NOTHING RETURNING` (`SqlStore.insert_new`), straight through the sqlite3 driver on
the writer's own thread.

Why: a fast turn's rows are one transaction of four executemany calls (turns, messages, llm_calls,
tool_invocations) of a few rows each, and SQLAlchemy's execute path around each (the compiled cache, the
parameter processing, the cursor result) was a large part of the writer's CPU per turn in benchmark 1; that
thread shares the GIL with the event loop, and the turn waits for the batch at its end. A burst's claim of
199 Slack events took 15-16 ms of CPU through SQLAlchemy's multi-row INSERT, and the burst's acks wait for
it; here it is one statement per ROWS_PER_STATEMENT rows (fewer where the SQLite library allows fewer
variables per statement: 999 before 3.32) whose text repeats the row's placeholders.

What stays SQLAlchemy's: the statement text (compiled once per statement and columns), each value through
its column type's own bind processor (JSON, DateTime as SQLAlchemy stores them; a value that is the very
object of the row before, like a batch's shared timestamp, is processed once), the Python-side column
defaults (`with_defaults`, as for the PostgreSQL recordsets), the transaction (`conn.begin()` around it),
and the errors: a driver error comes out as SQLAlchemy's (`DBAPIError.instance`), so the writer still tells
a locked or missing file (waited out) from a refused row (written one by one)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, cast

from sqlalchemy import Connection, Table
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.dml import Insert

from bot.store.recordset import with_defaults

ROWS_PER_STATEMENT = 500  # at most; x the columns, within the connection's variables per statement
Processor = Callable[[Any], Any]


class _Binder:
    """A row (a dict) to the statement's parameters, in their order, each through its type's processor."""

    def __init__(self, names: Sequence[str], processors: Sequence[Processor | None]) -> None:
        self.size = len(names)
        one: Callable[[dict[str, Any]], tuple[Any, ...]] = lambda row: (row[names[0]],)  # noqa: E731
        self._get: Callable[[dict[str, Any]], tuple[Any, ...]] = itemgetter(*names) if len(names) > 1 else one
        self._processed = [(i, p) for i, p in enumerate(processors) if p is not None]

    def rows(self, rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
        if not self._processed:
            return [tuple(self._get(row)) for row in rows]
        last: dict[int, tuple[Any, Any]] = {}  # position -> (the value, processed) of the row before
        out: list[tuple[Any, ...]] = []
        for row in rows:
            values = list(self._get(row))
            for i, process in self._processed:
                value, seen = values[i], last.get(i)
                if seen is not None and seen[0] is value:
                    values[i] = seen[1]
                else:
                    values[i] = process(value)
                    last[i] = (value, values[i])
            out.append(tuple(values))
        return out


Plan = tuple[str, _Binder]  # the statement's text, its parameters


class SqliteInserts:
    def __init__(self) -> None:
        self._plans: dict[tuple[Executable, tuple[str, ...]], Plan | None] = {}

    def run(self, conn: Connection, statement: Executable, rows: list[dict[str, Any]]) -> bool:
        """Execute a plain `insert(table)` for `rows` (all with the same keys); False if it is not one this can
        run (a key that is not a column), for the caller to execute the usual way."""
        plan, rows = self._plan(conn, statement, rows)
        if plan is None:
            return False
        sql, binder = plan
        _driver(conn, sql, lambda cursor: cursor.executemany(sql, binder.rows(rows)))
        return True

    def insert_new(self, conn: Connection, statement: Insert, rows: list[dict[str, Any]]
                   ) -> list[tuple[Any, ...]] | None:
        """`statement` (an `INSERT ... ON CONFLICT DO NOTHING RETURNING`) for all `rows`, a statement per
        ROWS_PER_STATEMENT rows, in the caller's transaction: what RETURNING gave. None: not one this can run."""
        plan, rows = self._plan(conn, statement, rows)
        if plan is None:
            return None
        sql, binder = plan
        group = _group(binder.size)
        head, found, tail = sql.partition(group)
        if not found or group in tail:
            return None
        driver = cast(sqlite3.Connection, conn.connection.driver_connection)
        per = max(1, min(ROWS_PER_STATEMENT, driver.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // binder.size))
        out: list[tuple[Any, ...]] = []
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            many = head + ", ".join([group] * len(chunk)) + tail
            values = [value for row in binder.rows(chunk) for value in row]
            out += _driver(conn, many, lambda cursor, sql=many, values=values: cursor.execute(sql, values).fetchall())
        return [tuple(r) for r in out]

    def _plan(self, conn: Connection, statement: Executable, rows: list[dict[str, Any]]
              ) -> tuple[Plan | None, list[dict[str, Any]]]:
        if not isinstance(statement, Insert):
            return None, rows
        table = cast(Table, statement.table)
        rows = with_defaults(table, rows)
        shape = (statement, tuple(rows[0]))
        if shape not in self._plans:
            self._plans[shape] = _compile(conn, statement, table, shape[1])
        return self._plans[shape], rows


def _compile(conn: Connection, statement: Insert, table: Table, keys: tuple[str, ...]) -> Plan | None:
    """The statement's text for rows with these keys, and how a row becomes its parameters."""
    if any(key not in table.c for key in keys):
        return None
    dialect = conn.dialect
    compiled = statement.compile(dialect=dialect, column_keys=list(keys))
    names = tuple(compiled.positiontup or ())
    if sorted(names) != sorted(keys):  # a value SQLAlchemy would compute itself (none here): its way
        return None
    processors = [table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names]
    return str(compiled), _Binder(names, processors)


def _group(columns: int) -> str:
    return "(" + ", ".join(["?"] * columns) + ")"


def _driver(conn: Connection, sql: str, run: Callable[[sqlite3.Cursor], Any]) -> Any:
    """Run on a cursor of the connection's sqlite3 connection; its errors as SQLAlchemy's."""
    cursor = cast(sqlite3.Connection, conn.connection.driver_connection).cursor()
    try:
        return run(cursor)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(sql, None, exc, sqlite3.Error) from exc
    finally:
        cursor.close()
