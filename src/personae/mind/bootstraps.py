"""Recorded bootstraps and the host process they belong to (the mind's side of the gate).

A stdio MCP server is started by its host (Claude Code, Codex, Copilot CLI);
the same host process runs the PreToolUse hook. The mind server records each
successful bootstrap with its parent's identity (:class:`~personae.procid.ProcessId`: pid and
kernel start time, so a reused pid never matches), and the gate looks for a
record whose host is one of its own ancestors (:func:`find_bootstrap`, the store's
read side in :mod:`personae.store.bootstraps`, re-exported here for the gate).

Kept to the standard library: the hook gate imports this on every tool call.
Process identity needs ``/proc`` (Linux); elsewhere it is ``None`` and only
session ids bind.
"""

from __future__ import annotations

import os

from personae.procid import ProcessId, proc_stat, process_id
from personae.store.bootstraps import find_bootstrap

__all__ = ["ProcessId", "ancestors", "find_bootstrap", "process_id"]


def ancestors(pid: int | None = None, *, depth: int = 8) -> list[ProcessId]:
    """The parent, grandparent, ... of ``pid`` (default: this process), up to ``depth``."""
    found: list[ProcessId] = []
    stat = proc_stat(os.getpid() if pid is None else pid)
    for _ in range(depth):
        if stat is None or stat.parent <= 1:
            break
        parent = proc_stat(stat.parent)  # read once: its start time, then its own parent
        if parent is None:
            break
        found.append(ProcessId(stat.parent, parent.started))
        stat = parent
    return found
