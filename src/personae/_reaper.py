"""The reaper: a tiny watchdog process that kills a run's processes when the run dies.

Started by :mod:`personae.procs` as ``python -I -S _reaper.py`` (stdlib only, no
package import, so it starts in milliseconds). It reads lines from stdin:
``+PGID`` registers a process group, ``-PGID`` forgets it, ``tPID`` asks it to
watch every descendant of process ``PID`` (the run, a child subreaper). When
stdin reaches end of file (the run exited, normally or by any signal including
SIGKILL: the kernel closes the pipe either way) it sends SIGKILL to every
registered group and to every descendant of the run it has seen (checked by
start time, so a reused pid is never hit) and to their descendants, then exits.
Descendants are noted every :data:`SCAN_INTERVAL` seconds and whenever a line
arrives: a process that left its group (``setsid``, a double-forked daemon)
and was reparented to the run is on the list before the run can die.
It ignores SIGINT, SIGTERM and SIGHUP so that a Ctrl-C or a hang-up aimed at
the run cannot stop it before it has cleaned up.

Any file descriptors it inherited beyond stdin/stdout/stderr (the "lifeline" of
a handover parent) stay open until it exits: a parent waiting for end of file
on that pipe knows the reaper has finished.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time

__all__ = ["SCAN_INTERVAL", "descendants", "kill_tree", "process_table"]

SCAN_INTERVAL = 0.2
"""Seconds between two looks at the watched run's descendants."""

Table = dict[int, tuple[int, str]]
"""Live (not zombie) processes: pid -> (parent pid, start time)."""


def process_table() -> Table:
    """Every live process from ``/proc``: pid -> (parent pid, start time in ticks)."""
    table: Table = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return table
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) < 20 or fields[0] in (b"Z", b"X"):
            continue
        table[int(entry)] = (int(fields[1]), fields[19].decode())
    return table


def descendants(roots: set[int], table: Table) -> dict[int, str]:
    """Every process below ``roots`` in ``table`` (roots excluded): pid -> start time."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _start) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, str] = {}
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found and child not in roots:
                found[child] = table[child][1]
                todo.append(child)
    return found


def kill_tree(
    known: dict[int, str], *, spare: frozenset[int] = frozenset(), rounds: int = 50
) -> int:
    """SIGKILL ``known`` processes (pid -> start time) still alive, and their descendants.

    Repeats until a look at ``/proc`` finds none of them (a process forked
    between two looks is caught on the next). ``spare`` is never killed.
    Returns how many processes were signalled.
    """
    killed = 0
    for _ in range(rounds):
        table = process_table()
        alive = {pid for pid, start in known.items() if table.get(pid, (0, ""))[1] == start}
        targets = {pid: table[pid][1] for pid in alive}
        targets.update(descendants(alive, table))
        for pid in spare:
            targets.pop(pid, None)
        if not targets:
            break
        for pid in targets:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        known = {**known, **targets}
        time.sleep(0.01)
    return killed


def _kill(groups: set[int]) -> None:
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def main() -> int:
    """Track groups (and the run's descendants) from stdin until EOF, then kill them all."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    groups: set[int] = set()
    root = 0
    seen: dict[int, str] = {}
    me = os.getpid()
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], SCAN_INTERVAL if root else None)
        if root:
            table = process_table()
            seen = {
                pid: start for pid, start in seen.items() if table.get(pid, (0, ""))[1] == start
            }
            seen.update(descendants({root}, table))
            seen.pop(me, None)
        if not ready:
            continue
        chunk = os.read(0, 4096)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            text = line.strip()
            if len(text) < 2 or not text[1:].isdigit() or int(text[1:]) <= 1:
                continue
            number = int(text[1:])
            if text[:1] == b"+":
                groups.add(number)
            elif text[:1] == b"-":
                groups.discard(number)
            elif text[:1] == b"t":
                root = number
    _kill(groups)
    if seen:
        kill_tree(seen, spare=frozenset({me}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
