"""Recorded bootstraps and the host process they belong to (the mind's side of the gate).

A stdio MCP server is started by its host (Claude Code, Codex, Copilot CLI);
the same host process runs the PreToolUse hook. The mind server records each
successful bootstrap with its parent's identity (:class:`ProcessId`: pid and
kernel start time, so a reused pid never matches), and the gate looks for a
record whose host is one of its own ancestors (:func:`find_bootstrap`, the store's
read side in :mod:`personae.store.bootstraps`, re-exported here for the gate).

Kept to the standard library: the hook gate imports this on every tool call.
Process identity needs ``/proc`` (Linux); elsewhere it is ``None`` and only
session ids bind.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from personae.store.bootstraps import find_bootstrap

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
