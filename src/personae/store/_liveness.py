"""Is the process running a run still there? Process identity and a heartbeat thread.

A run row records its process (pid, the kernel's start time of that pid, host name) and a
heartbeat the process refreshes every few seconds. A ``running`` row whose process is gone
(no such pid, a zombie, or the pid reused by a later process) is a crashed run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import UTC, datetime

from personae.procid import ProcessId, proc_stat, this_process
from personae.store.db import is_store_error

__all__ = ["HEARTBEAT_SECONDS", "Heartbeat", "ProcessId", "process_alive", "this_process"]

HEARTBEAT_SECONDS = 5.0
"""How often a running run's heartbeat is refreshed."""


def process_alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` (started at ``started``, when known) is still a live process here."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    stat = proc_stat(pid)
    if stat is None:
        return True  # no /proc: the pid exists, that is all we can tell
    if stat.state == "Z":  # killed, not yet reaped by its parent
        return False
    return started is None or stat.started == started


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
