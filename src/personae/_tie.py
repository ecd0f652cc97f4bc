"""Run a command tied to the process that started it (used for MCP stdio servers).

``python -I -S _tie.py PIDFILE COMMAND [ARG...]`` (stdlib only, no package
import): sets the parent-death signal (SIGKILL when the starting thread
exits; Linux), exits at once if that parent is already gone, starts a new
session when it does not lead one already (so the command's whole tree is one
process group), writes its pid (the group id) to ``PIDFILE``, then replaces
itself with ``COMMAND`` (same pid, same environment). Used where the
process is started by a library that takes no ``preexec_fn`` (the MCP SDK):
:mod:`personae.procs` reads ``PIDFILE`` and registers the group with the run.
If ``COMMAND`` cannot be run, one line goes to stderr and the exit code is 127.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def tie(argv: list[str]) -> int:
    """Tie, record the pid, exec ``argv[1:]``."""
    if len(argv) < 2:
        print("usage: _tie.py PIDFILE COMMAND [ARG...]", file=sys.stderr)
        return 2
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent or parent == 1:
        return 137
    if os.getpgid(0) != os.getpid():
        with contextlib.suppress(OSError):
            os.setsid()
    pidfile, command = argv[0], argv[1:]
    try:
        fd = os.open(pidfile, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 127
    return 127  # pragma: no cover - execvp does not return


if __name__ == "__main__":
    sys.exit(tie(sys.argv[1:]))
