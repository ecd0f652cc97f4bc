"""Recorded bootstraps and the host process they belong to (the mind's side of the gate).

A stdio MCP server is started by its host (Claude Code, Codex, Copilot CLI);
the same host process runs the PreToolUse hook. The mind server records each
successful bootstrap with its parent's identity (:class:`ProcessId`: pid and
kernel start time, so a reused pid never matches), and the gate looks for a
record whose host is one of its own ancestors (:func:`find_bootstrap`).

Kept to the standard library: the hook gate imports this on every tool call.
Process identity needs ``/proc`` (Linux); elsewhere it is ``None`` and only
session ids bind.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ProcessId", "ancestors", "find_bootstrap", "process_id"]

_PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessId:
    """A process: pid plus its start time in clock ticks since boot."""

    pid: int
    started: int


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) from ``/proc/PID/stat``, ``None`` when unreadable."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None


def process_id(pid: int) -> ProcessId | None:
    """The identity of ``pid`` (``None`` without ``/proc`` or when it is gone)."""
    stat = _stat(pid)
    return None if stat is None else ProcessId(pid, stat[1])


def ancestors(pid: int | None = None, *, depth: int = 8) -> list[ProcessId]:
    """The parent, grandparent, ... of ``pid`` (default: this process), up to ``depth``."""
    found: list[ProcessId] = []
    current = os.getpid() if pid is None else pid
    for _ in range(depth):
        stat = _stat(current)
        if stat is None or stat[0] <= 1:
            break
        parent = process_id(stat[0])
        if parent is None:
            break
        found.append(parent)
        current = parent.pid
    return found


def find_bootstrap(
    store: Path, *, session_id: str | None = None, hosts: list[ProcessId] | None = None
) -> tuple[bool, str]:
    """Whether the store holds a successful bootstrap of ``session_id`` or of one of ``hosts``.

    Opens the database read-only (never creates or migrates it); any error is a
    "no" with the reason.
    """
    if session_id is None and not hosts:
        return False, "no session id or host process to look up in the store"
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
        if session_id is not None:
            row = conn.execute(
                "SELECT 1 FROM mind_bootstraps WHERE session_id = ? LIMIT 1", (session_id,)
            ).fetchone()
            if row is not None:
                return True, "bootstrap_session succeeded (recorded for this session)"
        for host in hosts or []:
            row = conn.execute(
                "SELECT 1 FROM mind_bootstraps WHERE host_pid = ? AND host_started = ? LIMIT 1",
                (host.pid, host.started),
            ).fetchone()
            if row is not None:
                return True, "bootstrap_session succeeded (recorded for this host process)"
    except sqlite3.Error as exc:
        return False, f"store has no bootstrap records ({exc})"
    finally:
        conn.close()
    return False, "no recorded bootstrap for this session or host process in the store"
