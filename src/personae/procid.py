"""Process identity from ``/proc``: a pid plus the kernel's start time of that pid.

A pid alone is reused once its process is gone; the start time (clock ticks since boot,
field 22 of ``/proc/PID/stat``) makes the pair unique on one machine, so a reused pid
never matches. Used by the run store (is a run's process still alive?) and the hook gate
(is the host that bootstrapped the mind one of my ancestors?).

Kept to the standard library: the hook gate imports this on every tool call. Without
``/proc`` (not Linux) the start time is unknown (``None``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["ProcStat", "ProcessId", "proc_stat", "process_id", "this_process"]


@dataclass(frozen=True)
class ProcessId:
    """A process: pid, start time in clock ticks since boot (``None`` when unknown) and,
    where it was recorded with one, the host name it runs on (``""`` otherwise)."""

    pid: int
    started: int | None
    host: str = ""


class ProcStat(NamedTuple):
    """The fields of ``/proc/PID/stat`` personae reads."""

    state: str
    """One letter: ``R`` running, ``S`` sleeping, ``Z`` zombie ..."""
    parent: int
    """The parent's pid."""
    started: int
    """Start time in clock ticks since boot."""


def proc_stat(pid: int) -> ProcStat | None:
    """State, parent and start time of ``pid``; ``None`` without ``/proc`` or when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return ProcStat(fields[0].decode("ascii", "replace"), int(fields[1]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def process_id(pid: int) -> ProcessId | None:
    """The identity of ``pid`` (``None`` without ``/proc`` or when it is gone)."""
    stat = proc_stat(pid)
    return None if stat is None else ProcessId(pid, stat.started)


def this_process() -> ProcessId:
    """The current process, with this machine's host name (start time ``None`` off Linux)."""
    import socket  # local import: the hook gate loads this module on every call, never this

    pid = os.getpid()
    stat = proc_stat(pid)
    return ProcessId(pid, stat.started if stat else None, socket.gethostname())
