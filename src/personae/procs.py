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

A command that leaves its process group on purpose (``setsid``, a
double-forked daemon) escapes the group registry. :meth:`RunProcesses.capture_orphans`
covers it: the run becomes a *child subreaper* (``PR_SET_CHILD_SUBREAPER``),
so such orphans are reparented to the run instead of init; at normal exit
every remaining descendant is killed, and the watchdog notes the run's
descendants (pid and start time) several times a second and kills them when
the run dies any other way. The sandbox (a PID namespace, see
:mod:`personae.tools.sandbox`) contains them as well.

Processes started by a library that takes no ``preexec_fn`` (MCP stdio
servers, started by the MCP SDK) are run through :func:`tied_argv`: a tiny
wrapper sets the parent-death signal, writes its pid and ``exec``-s the
command; :meth:`RunProcesses.add_pidfile` registers the group.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import locale
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from personae._reaper import descendants, kill_tree, process_table

__all__ = [
    "LIFELINE_ENV",
    "RUN_PROCESSES",
    "UNATTENDED_ENV",
    "RunProcesses",
    "die_with_parent",
    "exit_descriptor",
    "lifeline",
    "run_tied",
    "tied_argv",
]

LIFELINE_ENV = "PERSONAE_LIFELINE_FD"
"""Environment variable naming the inherited lifeline descriptor of a handover child."""
UNATTENDED_ENV = "PERSONAE_UNATTENDED"
"""Set (``1``) for runs nobody watches: handover children, chain steps and batch tasks
(every child :func:`personae.handover.child.run_child` starts). In sandbox mode ``auto``
they refuse to run ``run_shell`` unsandboxed."""

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_REAPER = Path(__file__).with_name("_reaper.py")
_TIE = Path(__file__).with_name("_tie.py")


@functools.cache
def _load_prctl() -> Callable[..., int] | None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            return ctypes.CDLL(None, use_errno=True).prctl  # type: ignore[no-any-return]
    return None


def die_with_parent(*, register: bool = False) -> Callable[[], None]:
    """A ``preexec_fn`` that makes the child receive SIGKILL when its parent thread exits.

    If the parent is already gone by the time the child runs it (a race with
    a kill), the child exits at once. A no-op where ``prctl`` is missing.
    With ``register``, the child (a new session's leader) also tells the run's
    watchdog its process group itself, before it runs anything: a ``kill -9``
    of the run between the start and the parent's :meth:`RunProcesses.add`
    cannot leave the group unknown to the watchdog.
    """
    prctl = _load_prctl()
    parent = os.getpid()
    watch = RUN_PROCESSES.watch_fd() if register else None

    def preexec() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(137)
        if watch is not None:
            with contextlib.suppress(OSError):  # one short write: atomic on a pipe
                os.write(watch, b"+%d\n" % os.getpgid(0))

    return preexec


class RunProcesses:
    """The process groups this run started, killed together when the run ends."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._reaper: subprocess.Popen[bytes] | None = None
        self._owner = 0
        self._atexit = False
        self._subreaper = 0  # pid of the process that became a subreaper (0: not yet)

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

    def watch_fd(self) -> int | None:
        """The watchdog's input descriptor (starting it), for :func:`die_with_parent`."""
        with self._lock:
            self._register_atexit()
            if self._reaper is None or self._owner != os.getpid():
                self._reaper = self._start_reaper()
                self._owner = os.getpid()
            if self._reaper is None or self._reaper.stdin is None:
                return None
            return self._reaper.stdin.fileno()

    def _register_atexit(self) -> None:
        if not self._atexit:
            atexit.register(self.kill_all)
            self._atexit = True

    def capture_orphans(self) -> bool:
        """Make this process a child subreaper whose every descendant dies with it.

        Processes that leave their group and are orphaned (``setsid``, a
        double fork) are then reparented to this process; :meth:`kill_all`
        kills every remaining descendant, and the watchdog kills the ones it
        has seen if this process dies by a signal. Idempotent; ``False`` where
        ``prctl`` is missing (not Linux).
        """
        prctl = _load_prctl()
        if prctl is None:
            return False
        with self._lock:
            if self._subreaper == os.getpid():
                return True
            if prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
                return False
            self._subreaper = os.getpid()
            self._register_atexit()
            self._tell(f"t{self._subreaper}")
        return True

    def add(self, pgid: int) -> None:
        """Register process group ``pgid`` (killed when the run ends)."""
        with self._lock:
            self._register_atexit()
            self._groups.add(pgid)
            self._tell(f"+{pgid}")

    def discard(self, pgid: int) -> None:
        """Forget ``pgid`` (its processes are already gone)."""
        with self._lock:
            if pgid in self._groups:
                self._groups.discard(pgid)
                self._tell(f"-{pgid}")

    def add_pidfile(self, pidfile: Path) -> int | None:
        """Register the group whose leader wrote its pid to ``pidfile`` (see :func:`tied_argv`).

        Returns the group id, or ``None`` when the file holds no pid (the
        command never started).
        """
        try:
            text = pidfile.read_text(encoding="ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if not text.isdigit() or int(text) <= 1:
            return None
        self.add(int(text))
        return int(text)

    def kill_all(self) -> None:
        """SIGKILL every registered group now (normal exit and interruption).

        After :meth:`capture_orphans`, every other descendant of this process
        (but the watchdog) is killed too, repeatedly until none is left.
        """
        with self._lock:
            groups, self._groups = set(self._groups), set()
            for pgid in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                self._tell(f"-{pgid}")
            if self._subreaper == os.getpid():
                spare = frozenset({self._reaper.pid}) if self._reaper is not None else frozenset()
                kill_tree(descendants({os.getpid()}, process_table()), spare=spare)

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


def tied_argv(command: str, args: Sequence[str], pidfile: Path) -> tuple[str, list[str]]:
    """``(command, args)`` that run ``command args`` tied to the run (Linux).

    For processes started by code that takes no ``preexec_fn``: a wrapper
    (``personae/_tie.py``) sets the parent-death signal, starts a new session,
    writes its pid to ``pidfile`` (which must exist) and ``exec``-s the
    command, keeping its pid and environment. Register the group with
    :meth:`RunProcesses.add_pidfile` once the command has started. Elsewhere
    (no ``prctl``) the command is returned unchanged.
    """
    if _load_prctl() is None:
        return command, list(args)
    return sys.executable, ["-I", "-S", str(_TIE), str(pidfile), command, *args]


def run_tied(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    fork_free: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run`` for a short helper command, tied to the run.

    The command gets its own process group, the parent-death signal and a
    place in :data:`RUN_PROCESSES`; its output is captured as text (undecodable
    bytes replaced), stdin is empty. At ``timeout`` the whole group (background
    children included) is killed and ``subprocess.TimeoutExpired`` raised; the
    group is killed when the command ends too. ``OSError`` if it cannot start.

    ``fork_free``: no parent-death signal (it needs a ``preexec`` hook, which
    makes the start copy the parent's memory: tens of milliseconds in a large
    process); for read-only commands that end by themselves within ``timeout``.
    """
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=None if fork_free else die_with_parent(register=True),  # noqa: PLW1509 - this thread waits
    )
    with proc, RUN_PROCESSES.tracked(proc.pid):
        try:
            out, err = _output(proc, timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.communicate(timeout=1.0)
            raise
    return subprocess.CompletedProcess(list(argv), proc.returncode, _text(out), _text(err))


def exit_descriptor(pid: int) -> int | None:
    """A descriptor that turns readable when process ``pid`` (a child not reaped yet)
    exits, to close after use; ``None`` where none opens (not Linux 5.3+, or the
    process is gone). Waiting on it wakes at the exit instead of polling for it."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _output(proc: subprocess.Popen[bytes], timeout: float) -> tuple[bytes, bytes]:
    """``proc``'s stdout and stderr, read to their end, and ``proc`` reaped, within
    ``timeout`` seconds (``subprocess.TimeoutExpired`` after).

    Where a process descriptor opens (Linux), the exit itself wakes the wait:
    ``communicate(timeout=...)`` looks for the exit in sleeps of 1 ms and more, and
    the output usually ends just before the exit, so it lost about a millisecond a
    command. Elsewhere: ``communicate`` as is.
    """
    assert proc.stdout is not None and proc.stderr is not None
    exit_fd = exit_descriptor(proc.pid)
    if exit_fd is None:
        return proc.communicate(timeout=timeout)
    deadline = time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {proc.stdout.fileno(): [], proc.stderr.fileno(): []}
    poller = select.poll()
    for fd in (*chunks, exit_fd):
        poller.register(fd, select.POLLIN)
    waiting = {*chunks, exit_fd}
    try:
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, timeout)
            for fd, _event in poller.poll(min(left, _POLL_MAX) * 1000):
                data = b"" if fd == exit_fd else os.read(fd, 65536)
                if data:
                    chunks[fd].append(data)
                else:  # end of that output, or the exit
                    poller.unregister(fd)
                    waiting.discard(fd)
    finally:
        os.close(exit_fd)
    proc.wait()
    out, err = (b"".join(chunks[fd]) for fd in (proc.stdout.fileno(), proc.stderr.fileno()))
    return out, err


_POLL_MAX = 86_400.0
"""The longest single ``poll`` in seconds (its timeout is an int of milliseconds); a
longer wait polls again."""


def _text(data: bytes) -> str:
    """Output as ``subprocess`` gives it in text mode: the locale's encoding
    (undecodable bytes replaced), universal newlines."""
    text = data.decode(locale.getpreferredencoding(False), "replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")
