"""PostgreSQL: many rows of a table as ONE JSON array parameter, read back into rows by `json_to_recordset`.

A multi-row statement built by SQLAlchemy (`insertmanyvalues`) has one placeholder per value, so its text
changes with the number of rows: asyncpg prepares it again for each new count (one more round trip), and
SQLAlchemy binds every value of every row on the event loop. Here the text depends only on the table and the
columns, so it is prepared once, and the rows go as one `json` value: in a burst of 200 Slack events the
claim's INSERT took 10-17 ms instead of 34-38 ms (bench/slack_ack.py).

The SQL holds only the schema's own names (quoted by the dialect) and column types; every value is in the
parameter. `rows_json` refuses (TypeError, ValueError) a value that is not plain JSON, a datetime aside.
Used by the write-behind batch (bot/store/writer.py) and by `SqlStore.insert_new` (claims, sessions)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Table
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine


class Recordsets:
    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.quote = dialect.identifier_preparer.quote
        self._serialize: Callable[[Any], str] = getattr(dialect, "_json_serializer", None) or json.dumps
        self._json_cols: dict[str, frozenset[str]] = {}

    def json_columns(self, table: Table) -> frozenset[str]:
        found = self._json_cols.get(table.name)
        if found is None:
            found = self._json_cols[table.name] = frozenset(c.name for c in table.columns if isinstance(c.type, JSON))
        return found

    def source(self, table: Table, names: Sequence[str], index: int) -> tuple[str, dict[str, str]]:
        """`ROWS FROM (json_to_recordset($index)) ... AS x(...)`, and per column the expression of its value."""
        quote, as_json = self.quote, self.json_columns(table)
        columns = [table.columns[name] for name in names]
        decl = ", ".join(f"{quote(c.name)} {'text' if c.name in as_json else c.type.compile(self.dialect)}"
                         for c in columns)
        listed = ", ".join(quote(c.name) for c in columns)
        source = f"ROWS FROM (json_to_recordset(${index}::json) AS ({decl})) WITH ORDINALITY AS x({listed}, n)"
        return source, {c.name: f"x.{quote(c.name)}" + ("::json" if c.name in as_json else "") for c in columns}

    def insert(self, table: Table, names: Sequence[str], index: int = 1) -> str:
        """`INSERT INTO table (names) SELECT ...` of parameter $index's rows, in their order (so their ids are)."""
        source, value = self.source(table, names, index)
        cols = ", ".join(self.quote(c) for c in value)
        return (f"INSERT INTO {self.quote(table.name)} ({cols}) "  # noqa: S608 (names of the schema, quoted)
                f"SELECT {', '.join(value.values())} FROM {source} ORDER BY x.n")

    def rows_json(self, table: Table, rows: Sequence[dict[str, Any]]) -> str:
        """The parameter: a JSON column's value as SQLAlchemy's JSON type writes it (its text; None is null)."""
        as_json = self.json_columns(table)
        return json.dumps([{k: self._serialize(v) if k in as_json else v for k, v in row.items()} for row in rows],
                          ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_plain)


async def run_raw(autocommit: AsyncEngine, sql: str, *args: Any, fetch: bool = False,
                  seen: Callable[[AsyncConnection, Any], None] | None = None) -> list[Any]:
    """One statement straight on the driver's connection (autocommit: one round trip). SQLAlchemy does not see it
    fail, so a connection whose statement failed is thrown away rather than going back to the pool. `seen` is
    given the connection and the driver's before the statement is sent."""
    async with autocommit.connect() as conn:
        driver: Any = (await conn.get_raw_connection()).driver_connection
        if seen is not None:
            seen(conn, driver)
        try:
            if fetch:
                return list(await driver.fetch(sql, *args))
            await driver.execute(sql, *args)
            return []
        except Exception:
            await conn.invalidate()
            raise


def with_defaults(table: Table, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows with the Python-side column defaults SQLAlchemy would have filled in (`default=`), for the
    columns they leave out (the key, and columns with a server default, are left to the database)."""
    missing = [c for c in table.columns if c.name not in rows[0] and c.default is not None
               and c.server_default is None and not (c.primary_key and c.autoincrement is True)]
    if not missing:
        return rows
    out: list[dict[str, Any]] = []
    for row in rows:
        extra: dict[str, Any] = {}
        for column in missing:
            default: Any = column.default
            extra[column.name] = default.arg(None) if default.is_callable else default.arg
        out.append(row | extra)
    return out


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(type(value).__name__)
