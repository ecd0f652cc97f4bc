"""Is the process running a run still there? Process identity and a heartbeat thread.

A run row records its process (pid, the kernel's start time of that pid, host name) and a
heartbeat the process refreshes every few seconds. A ``running`` row whose process is gone
(no such pid, a zombie, or the pid reused by a later process) is a crashed run.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from personae.store.db import is_store_error

__all__ = ["HEARTBEAT_SECONDS", "Heartbeat", "ProcessId", "process_alive", "this_process"]

HEARTBEAT_SECONDS = 5.0
"""How often a running run's heartbeat is refreshed."""


class ProcessId:
    """A process as recorded: pid, start time (clock ticks since boot; ``None`` off Linux), host."""

    __slots__ = ("host", "pid", "started")

    def __init__(self, pid: int, started: int | None, host: str) -> None:
        self.pid = pid
        self.started = started
        self.host = host


def _stat(pid: int) -> tuple[str, int] | None:
    """``(state, start time)`` from ``/proc/PID/stat``; ``None`` when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()  # after "pid (comm) "
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None


def this_process() -> ProcessId:
    """The current process."""
    pid = os.getpid()
    stat = _stat(pid)
    return ProcessId(pid, stat[1] if stat else None, socket.gethostname())


def process_alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` (started at ``started``, when known) is still a live process here."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    stat = _stat(pid)
    if stat is None:
        return True  # no /proc: the pid exists, that is all we can tell
    state, start = stat
    if state == "Z":  # killed, not yet reaped by its parent
        return False
    return started is None or start == started


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Heartbeat:
    """A daemon thread that calls ``beat(now)`` every ``every`` seconds until stopped."""

    def __init__(self, beat: Callable[[str], None], every: float = HEARTBEAT_SECONDS) -> None:
        self._beat = beat
        self._every = every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="personae-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        """Start beating."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop (returns at once; the thread ends at its next wake-up)."""
        self._stop.set()

    def _loop(self) -> None:
        while not self._stop.wait(self._every):
            try:
                self._beat(_now())
            except Exception as exc:  # store closed or busy: the run is ending
                if isinstance(exc, ValueError) or is_store_error(exc):
                    return
                raise
