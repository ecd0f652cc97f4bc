"""Look up recorded bootstraps for the hook gate (the mind's store API, read side).

The gate runs on every tool call: this module imports only the standard library and
:mod:`personae.store.db` (no psycopg, no pydantic). A SQLite store is opened read-only
(never created or migrated). A project on PostgreSQL (``PERSONAE_DATABASE_URL`` or
``database_url`` in its config) is queried with one short psycopg connection, imported
only then. Every failure (no store, unreadable config, psycopg missing, server down) is a
"no" with the reason: the gate fails closed.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from personae.procid import ProcessId
from personae.store.db import StoreError, database_url_for

__all__ = ["CONNECT_TIMEOUT", "find_bootstrap"]

CONNECT_TIMEOUT = 2
"""Seconds the gate waits for a PostgreSQL connection before denying."""
_BY_SESSION = "SELECT 1 FROM mind_bootstraps WHERE session_id = ? LIMIT 1"
_BY_HOST = "SELECT 1 FROM mind_bootstraps WHERE host_pid = ? AND host_started = ? LIMIT 1"


def find_bootstrap(
    store: Path, *, session_id: str | None = None, hosts: Sequence[ProcessId] | None = None
) -> tuple[bool, str]:
    """Whether the store holds a successful bootstrap of ``session_id`` or of one of ``hosts``.

    ``store`` is the project's SQLite path (``.personae/state.db``); a configured database
    URL redirects the lookup to PostgreSQL. Any error is a "no" with the reason.
    """
    if session_id is None and not hosts:
        return False, "no session id or host process to look up in the store"
    try:
        url = database_url_for(store)
    except StoreError as exc:
        return False, f"store unreadable: {exc}"
    if url:
        return _find_in_postgres(url, session_id, hosts or [])
    try:
        info = os.stat(store)
    except (OSError, ValueError):
        return False, f"no store at {store}"
    if not stat.S_ISREG(info.st_mode):
        return False, f"store {store} is not a regular file"
    try:
        conn = sqlite3.connect(store.resolve().as_uri() + "?mode=ro", uri=True, timeout=0.5)
    except (sqlite3.Error, OSError, ValueError) as exc:
        return False, f"store unreadable: {exc}"
    try:
        return _lookup(lambda sql, args: conn.execute(sql, args).fetchone(), session_id, hosts)
    except sqlite3.Error as exc:
        return False, f"store has no bootstrap records ({exc})"
    finally:
        conn.close()


def _lookup(
    one: Callable[[str, tuple[Any, ...]], Any],
    session_id: str | None,
    hosts: Sequence[ProcessId] | None,
) -> tuple[bool, str]:
    if session_id is not None and one(_BY_SESSION, (session_id,)) is not None:
        return True, "bootstrap_session succeeded (recorded for this session)"
    for host in hosts or []:
        if one(_BY_HOST, (host.pid, host.started)) is not None:
            return True, "bootstrap_session succeeded (recorded for this host process)"
    return False, "no recorded bootstrap for this session or host process in the store"


def _find_in_postgres(
    url: str, session_id: str | None, hosts: Sequence[ProcessId]
) -> tuple[bool, str]:
    try:
        # local import: optional extra personae[postgres]: only for projects that configured a URL
        import psycopg  # the postgres extra: only for projects that configured a URL
    except ImportError:
        return False, "a PostgreSQL store is configured but psycopg is not installed"
    try:
        with psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT, autocommit=True) as conn:
            return _lookup(
                lambda sql, args: conn.execute(sql.replace("?", "%s"), args).fetchone(),  # type: ignore[arg-type]
                session_id,
                hosts,
            )
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return False, f"PostgreSQL store unreachable or without bootstrap records ({reason})"
