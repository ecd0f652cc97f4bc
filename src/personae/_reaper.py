"""The reaper: a tiny watchdog process that kills a run's process groups when the run dies.

Started by :mod:`personae.procs` as ``python -I -S _reaper.py`` (stdlib only, no
package import, so it starts in milliseconds). It reads lines from stdin:
``+PGID`` registers a process group, ``-PGID`` forgets it. When stdin reaches
end of file (the run exited, normally or by any signal including SIGKILL: the
kernel closes the pipe either way) it sends SIGKILL to every registered group,
then exits. It ignores SIGINT, SIGTERM and SIGHUP so that a Ctrl-C or a hang-up
aimed at the run cannot stop it before it has cleaned up.

Any file descriptors it inherited beyond stdin/stdout/stderr (the "lifeline" of
a handover parent) stay open until it exits: a parent waiting for end of file
on that pipe knows the reaper has finished.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys


def _kill(groups: set[int]) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def main() -> int:
    """Track groups from stdin until EOF, then kill them all."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    stream = sys.stdin.buffer
    while True:
        line = stream.readline()
        if not line:
            break
        text = line.strip()
        if len(text) < 2 or not text[1:].isdigit():
            continue
        pgid = int(text[1:])
        if pgid <= 1:
            continue
        if text[:1] == b"+":
            groups.add(pgid)
        elif text[:1] == b"-":
            groups.discard(pgid)
    _kill(groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
