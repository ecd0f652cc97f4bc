"""Recorded bootstraps as the hook gate sees them (the mind's store API, gate side).

The gate looks bootstraps up on every gated tool call, and records a *claim* (the host's
session id for this call) when the host calls an unlock tool. This module imports only the
standard library and :mod:`personae.store.db` (no psycopg, no pydantic). A SQLite store is
opened read-only for a lookup and read-write for a claim, never created or migrated.
A project on PostgreSQL (``PERSONAE_DATABASE_URL`` or
``database_url`` in its config) is queried with one short psycopg connection, imported
only then. Every failure (no store, unreadable config, psycopg missing, server down) is a
"no" with the reason: the gate fails closed.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from personae.procid import ProcessId
from personae.store.db import StoreError, database_url_for

__all__ = [
    "CONNECT_TIMEOUT",
    "POSTGRES_BUDGET",
    "bootstrap_scope",
    "find_bootstrap",
    "lookup_budget",
    "record_claim",
]

CONNECT_TIMEOUT = 2
"""Seconds the gate waits for a PostgreSQL connection before denying."""
_BY_SESSION = "SELECT 1 FROM mind_bootstraps WHERE scope = ? AND session_id = ? LIMIT 1"
_BY_HOST = (
    "SELECT 1 FROM mind_bootstraps WHERE scope = ? AND host_pid = ? AND host_started = ? LIMIT 1"
)
_CLAIM = (
    "INSERT INTO mind_bootstrap_claims(scope, session_id, call_id, host_pid, host_started)"
    " VALUES (?, ?, ?, ?, ?)"
)


POSTGRES_BUDGET = 4.0
"""Seconds the gate may take to decide when the project's store is on PostgreSQL: importing
psycopg and connecting take ~0.15 s on an idle machine and 1.2-1.6 s measured at load
average 10, past the 0.6 s a SQLite lookup gets (still under the hook command's 7 s
watchdog and the hosts' 10 s hook timeout)."""


def lookup_budget(store: Path, default: float) -> float:
    """The gate's time budget for a lookup in ``store``: :data:`POSTGRES_BUDGET` when a
    database URL redirects it to PostgreSQL, else ``default`` (also when the config cannot
    be read: the lookup then fails closed at once)."""
    try:
        url = database_url_for(store)
    except StoreError:
        return default
    return max(default, POSTGRES_BUDGET) if url else default


def bootstrap_scope(store: Path | str) -> str:
    """The project a bootstrap belongs to: this machine's name and the real path of the
    project's store file (the same for the mind server and the gate of one project; rows of
    another project on a shared PostgreSQL database never match)."""
    return f"{os.uname().nodename}:{os.path.realpath(store)}"


def find_bootstrap(
    store: Path, *, session_id: str | None = None, host: ProcessId | None = None
) -> tuple[bool, str]:
    """Whether the store holds a successful bootstrap of this project for ``session_id``,
    else (no session id) for the host process ``host``.

    A session id, when the host gives one, is the only key: a bootstrap of another session
    of the same host process (``/clear``, a second ACP session, a host started from a
    bootstrapped host's shell) never counts. ``store`` is the project's SQLite path
    (``.personae/state.db``); a configured database URL redirects the lookup to
    PostgreSQL. Any error is a "no" with the reason.
    """
    if session_id is None and host is None:
        return False, "no session id or host process to look up in the store"
    scope = bootstrap_scope(store)
    args: tuple[Any, ...]
    if session_id is not None:
        query, args, found = _BY_SESSION, (scope, session_id), "this session"
    else:
        assert host is not None
        query, args, found = _BY_HOST, (scope, host.pid, host.started), "this host process"
    answer = _with_store(store, lambda one: one(query, args) is not None, write=False)
    if isinstance(answer, str):
        return False, answer
    if answer:
        return True, f"bootstrap_session succeeded (recorded for {found})"
    return False, f"no recorded bootstrap for {found} in this project's store"


def record_claim(
    store: Path, *, session_id: str, call_id: str | None, host: ProcessId | None
) -> str | None:
    """Record that the host's session ``session_id`` is calling an unlock tool (``call_id``:
    the host's id of that call). The mind server binds the bootstrap it records to this
    session. Returns why it could not (``None``: recorded); never creates a store."""
    args = (
        bootstrap_scope(store),
        session_id,
        call_id,
        None if host is None else host.pid,
        None if host is None else host.started,
    )
    answer = _with_store(store, lambda one: one(_CLAIM, args), write=True)
    return answer if isinstance(answer, str) else None


_One = Callable[[str, tuple[Any, ...]], Any]


def _with_store(store: Path, use: Callable[[_One], Any], *, write: bool) -> Any:
    """``use(one)`` on the project's store, ``one(sql, args)`` giving the first row; a string
    saying why when the store cannot be used (missing, unreadable, not migrated)."""
    try:
        url = database_url_for(store)
    except StoreError as exc:
        return f"store unreadable: {exc}"
    if url:
        return _in_postgres(url, use)
    try:
        info = os.stat(store)
    except (OSError, ValueError):
        return f"no store at {store}"
    if not stat.S_ISREG(info.st_mode):
        return f"store {store} is not a regular file"
    mode = "rw" if write else "ro"
    try:
        conn = sqlite3.connect(
            Path(store).resolve().as_uri() + f"?mode={mode}", uri=True, timeout=0.5
        )
    except (sqlite3.Error, OSError, ValueError) as exc:
        return f"store unreadable: {exc}"
    try:
        with conn:
            return use(lambda sql, args: conn.execute(sql, args).fetchone())
    except sqlite3.Error as exc:
        return f"store has no bootstrap records ({exc})"
    finally:
        conn.close()


def _in_postgres(url: str, use: Callable[[_One], Any]) -> Any:
    try:
        # local import: optional extra personae[postgres]: only for projects that configured a URL
        import psycopg  # the postgres extra: only for projects that configured a URL
    except ImportError:
        return "a PostgreSQL store is configured but psycopg is not installed"

    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:

            def one(sql: str, args: tuple[Any, ...]) -> Any:
                cursor = conn.execute(sql.replace("?", "%s"), args)  # type: ignore[arg-type]
                return cursor.fetchone() if cursor.description else None

            return use(one)
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"PostgreSQL store unreachable or without bootstrap records ({reason})"
