"""`CursorPlans`: a flush's Core statements run on a SQLite connection's
cursor, without SQLAlchemy's execution machinery for each one.

A SQLite file's flush runs on its writer thread (`sqlite_thread.py`), some
five statements a transaction. SQLAlchemy's per-statement work (an
execution context, each row's parameters built from the compiled
statement, a result set up and closed, the connection checked out and
back) was about half of that thread's time: more than SQLite's own.

A plan is what SQLAlchemy's execution would derive from the statement
compiled for the rows' keys, derived once: the SQL text, and for each
`?` in order either the row's value (through the dialect's own bind
processor: JSON, floats, as SQLAlchemy sends them) or the statement's
fixed value. It runs with the DB-API cursor's `executemany` in the
transaction the SQLAlchemy connection opened, so the COMMIT, the rollback
and the isolation are SQLAlchemy's as before; a DB-API error is raised as
SQLAlchemy's `DBAPIError`, as `Connection.execute` raises it.

A statement a plan cannot run as SQLAlchemy would (RETURNING, an IN list
expanded per call, Python-side defaults, renamed parameters), any other
database, or rows without every key the first row has, go to
`Connection.execute` unchanged: the same rows written, the same error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Executable
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement

Row = dict[str, Any]
Processor = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Plan:
    """One statement compiled for one set of row keys, ready for a cursor."""

    sql: str
    keys: tuple[str, ...]
    """The rows' keys it was compiled for (each row must have them all)."""
    slots: tuple[tuple[str | None, Processor | None, Any], ...]
    """Per `?`: the row key (None: the fixed value), its bind processor,
    and the fixed value."""

    def parameters(self, row: Row) -> tuple[Any, ...]:
        return tuple(
            value if key is None else row[key] if fix is None else fix(row[key])
            for key, fix, value in self.slots
        )


def plan(dialect: Dialect, statement: Executable, keys: tuple[str, ...]) -> Plan | None:
    """The plan of `statement` for rows with `keys`; None where only
    SQLAlchemy's own execution would do."""
    if not isinstance(statement, ClauseElement):
        return None
    compiled = statement.compile(
        dialect=dialect, column_keys=list(keys), for_executemany=True
    )
    if not isinstance(compiled, SQLCompiler) or not _plain(compiled):
        return None
    by_name = {name: bind for bind, name in compiled.bind_names.items()}
    processors = compiled._bind_processors
    given = set(keys)
    slots: list[tuple[str | None, Processor | None, Any]] = []
    for name in compiled.positiontup or ():
        found = processors.get(name)
        if found is not None and not callable(found):
            return None  # a tuple's processors: not in a flush
        fix: Processor | None = found
        if name in given:
            slots.append((name, fix, None))
            continue
        bind = by_name.get(name)
        if bind is None or bind.required:
            return None  # SQLAlchemy says what is missing
        value = bind.effective_value
        slots.append((None, None, fix(value) if fix is not None else value))
    return Plan(compiled.string, keys, tuple(slots))


def _plain(compiled: SQLCompiler) -> bool:
    """Nothing SQLAlchemy adds at execution: no RETURNING, no IN list
    expanded per call, no Python-side default, no renamed parameter."""
    return bool(
        compiled.positional
        and not compiled.effective_returning
        and not compiled.insert_prefetch
        and not compiled.update_prefetch
        and not compiled.escaped_bind_names
        and not compiled.literal_execute_params
        and not compiled.post_compile_params
        and not any(bind.expanding for bind in compiled.bind_names)
    )


class CursorPlans:
    """The plans of a database's statements, made at first use (one per
    statement and set of row keys)."""

    def __init__(self) -> None:
        self._plans: dict[tuple[int, tuple[str, ...]], Plan | None] = {}
        self._held: list[Executable] = []
        """The statements planned (so an id is never reused for another)."""

    @property
    def planned(self) -> int:
        """How many statements (each for one set of row keys) run on the cursor."""
        return sum(found is not None for found in self._plans.values())

    def execute(
        self, conn: Connection, statement: Executable, rows: Sequence[Row]
    ) -> int:
        """`conn.execute(statement, rows)`, on SQLite's cursor when it can;
        the rows it changed, as the DB-API counts them."""
        found = self._plan(conn, statement, rows)
        if found is None:
            return int(conn.execute(statement, list(rows)).rowcount or 0)
        try:
            parameters = [found.parameters(row) for row in rows]
        except KeyError:  # a row short of a key: SQLAlchemy's error says which
            return int(conn.execute(statement, list(rows)).rowcount or 0)
        return _run(conn, found.sql, parameters)

    def _plan(
        self, conn: Connection, statement: Executable, rows: Sequence[Row]
    ) -> Plan | None:
        dialect = conn.dialect
        if dialect.name != "sqlite" or not rows:
            return None
        keys = tuple(rows[0])
        slot = (id(statement), keys)
        if slot not in self._plans:
            self._held.append(statement)
            self._plans[slot] = plan(dialect, statement, keys)
        return self._plans[slot]


def _run(conn: Connection, sql: str, parameters: list[tuple[Any, ...]]) -> int:
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    cursor = dbapi.cursor()
    try:
        if len(parameters) == 1:
            cursor.execute(sql, parameters[0])
        else:
            cursor.executemany(sql, parameters)
        return int(cursor.rowcount)
    except conn.dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(
            sql,
            parameters,
            exc,
            conn.dialect.loaded_dbapi.Error,
            dialect=conn.dialect,
            ismulti=len(parameters) > 1,
        ) from exc
    finally:
        cursor.close()
