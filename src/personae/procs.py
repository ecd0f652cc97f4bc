"""Every process a run starts dies with it.

Three layers, each covering what the one before cannot:

* **Own process group.** Commands and child runs start in a new session, so a
  whole command tree (background jobs included) is killed with one
  ``killpg``.
* **Parent-death signal.** :func:`die_with_parent` (a ``preexec_fn``) sets
  ``PR_SET_PDEATHSIG`` to SIGKILL in the child, so the direct child dies when
  its parent does. Linux sends it when the parent *thread* that forked the
  child exits, so it is only used where the spawning thread outlives the child
  (the event loop awaiting a command, a supervising thread waiting on a
  child run).
* **Run-wide registry** (:data:`RUN_PROCESSES`). Every group the run starts is
  registered; they are all killed at normal exit (``atexit``), and a small
  watchdog process (``personae/_reaper.py``) holding the other end of a pipe
  kills them when the run dies any other way (SIGTERM, SIGINT, SIGKILL,
  crash): the kernel closes the pipe, the watchdog sees end of file.

A handover parent passes a *lifeline* pipe to its child (:func:`lifeline`):
the child's watchdog inherits it, so once the parent reads end of file the
child and its watchdog are both gone, and the tools the child started have
been killed. That is how a timed-out attempt is dead before its retry starts.

A command that leaves its process group on purpose (``setsid``) escapes the
registry; only the sandbox (a PID namespace, see :mod:`personae.tools.sandbox`)
contains that.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = [
    "LIFELINE_ENV",
    "RUN_PROCESSES",
    "RunProcesses",
    "die_with_parent",
    "lifeline",
]

LIFELINE_ENV = "PERSONAE_LIFELINE_FD"
"""Environment variable naming the inherited lifeline descriptor of a handover child."""

_PR_SET_PDEATHSIG = 1
_REAPER = Path(__file__).with_name("_reaper.py")


@functools.cache
def _load_prctl() -> Callable[..., int] | None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    return None


def die_with_parent() -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive SIGKILL when its parent thread exits.

    If the parent is already gone by the time the child runs it (a race with
    a kill), the child exits at once. A no-op where ``prctl`` is missing.
    """
    prctl = _load_prctl()
    parent = os.getpid()

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)

    return preexec


class RunProcesses:
    """The process groups this run started, killed together when the run ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._reaper: subprocess.Popen[bytes] | None = None
        self._owner = 0
        self._atexit = False

    @property
    def groups(self) -> frozenset[int]:
        """Process groups currently registered."""
        with self._lock:
            return frozenset(self._groups)

    def _tell(self, line: str) -> None:
        """Send one line to the watchdog, starting it on first use (lock held)."""
        if self._reaper is None or self._owner != os.getpid():
            self._reaper = self._start_reaper()
            self._owner = os.getpid()
        if self._reaper is None or self._reaper.stdin is None:
            return
        try:
            self._reaper.stdin.write(line.encode() + b"\n")
            self._reaper.stdin.flush()
        except (BrokenPipeError, OSError):
            self._reaper = None

    @staticmethod
    def _start_reaper() -> subprocess.Popen[bytes] | None:
        keep: tuple[int, ...] = ()
        inherited = os.environ.get(LIFELINE_ENV, "")
        if inherited.isdigit():
            with contextlib.suppress(OSError):
                os.fstat(int(inherited))
                keep = (int(inherited),)
        try:
            return subprocess.Popen(
                [sys.executable, "-I", "-S", str(_REAPER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C on the terminal does not reach it
                pass_fds=keep,
            )
        except OSError:  # pragma: no cover - no interpreter to run: in-process cleanup only
            return None

    def add(self, pgid: int) -> None:
        """Register process group ``pgid`` (killed when the run ends)."""
        with self._lock:
            if not self._atexit:
                atexit.register(self.kill_all)
                self._atexit = True
            self._groups.add(pgid)
            self._tell(f"+{pgid}")

    def discard(self, pgid: int) -> None:
        """Forget ``pgid`` (its processes are already gone)."""
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._tell(f"-{pgid}")

    def kill_all(self) -> None:
        """SIGKILL every registered group now (normal exit and interruption)."""
        with self._lock:
            groups, self._groups = set(self._groups), set()
            for pgid in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                self._tell(f"-{pgid}")

    @contextlib.contextmanager
    def tracked(self, pgid: int) -> Iterator[None]:
        """Register ``pgid`` for the duration of the block; kill and forget it at the end."""
        self.add(pgid)
        try:
            yield
        finally:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            self.discard(pgid)


RUN_PROCESSES = RunProcesses()
"""The registry of the current process (one run per ``personae`` process)."""


@contextlib.contextmanager
def lifeline() -> Iterator[tuple[int, Callable[[float], bool]]]:
    """A pipe whose write end a child (and its watchdog) inherit.

    Yields ``(fd, wait)``: pass ``fd`` to the child with ``pass_fds`` and
    ``{LIFELINE_ENV: str(fd)}``; after the child has exited, ``wait(timeout)``
    closes the parent's copy and returns ``True`` once every holder (the child's
    watchdog, which kills the child's tools first) is gone, ``False`` at the
    timeout.
    """
    read_end, write_end = os.pipe()
    closed = False

    def wait(timeout: float) -> bool:
        nonlocal closed
        if not closed:
            os.close(write_end)
            closed = True
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([read_end], [], [], left)
            if ready and not os.read(read_end, 4096):
                return True

    try:
        yield write_end, wait
    finally:
        if not closed:
            os.close(write_end)
        os.close(read_end)
