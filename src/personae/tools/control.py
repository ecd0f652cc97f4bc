"""Control paths (:data:`personae.layout.CONTROL_NAMES`): read-only to the contained agent.

A contained agent may write its workspace, never what decides how it (or the
next run, the next chain step, the user's git or a host session) is run:

* ``.personae/`` -- the project config, personas, skills, the store, memory;
* ``.git/`` -- hooks and config run code at the user's next git command;
* host settings and MCP entries: ``.claude/``, ``.codex/``, ``.gemini/``,
  ``.github/``, ``.vscode/``, ``.mcp.json``;
* the instruction files hosts load: ``CLAUDE.md``, ``CLAUDE.local.md``,
  ``AGENTS.md``, ``AGENTS.override.md``, ``GEMINI.md``.

They are the names directly in the workspace root. The file tools refuse to
write them (any letter case, through links or ``..``: the resolved path is
checked); the ``run_shell`` sandbox binds them read-only over the workspace,
and binds an empty read-only placeholder where one does not exist yet, so it
cannot be created either (:class:`Placeholders`).

The project config can grant one persona write access to some of them by name
(``sandbox.control_write``); ``.personae`` can never be granted.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from personae.layout import CONTROL_DIRS, CONTROL_NAMES

__all__ = ["Lease", "Placeholders"]


class Placeholders:
    """Empty read-only stand-ins for missing control paths while sandboxed commands run.

    Each command takes a lease (:meth:`acquire`): a shared ``flock`` on
    the workspace folder is taken, every missing control path is created
    empty (by this process, relative to the root's descriptor, never through
    a link) and the returned list of bind arguments covers all of them. When
    the last command of this process on that workspace ends, the placeholders
    this process made are removed if they are still empty and no command of
    any process holds the workspace (an exclusive, non-blocking ``flock``);
    otherwise they stay, empty, and are bound read-only again by the next
    command. Removing a placeholder another process has bound would detach
    that bind and let its command create the path, hence the lock.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users: dict[Path, int] = {}
        self._made: dict[Path, set[str]] = {}

    def acquire(self, root: Path, granted: Iterable[str] = (), *, wait: float = 30.0) -> Lease:
        """Take the workspace for one command; the lease's ``args`` bind the control paths.

        Blocks (call it from a worker thread) until no other process is
        clearing placeholders of ``root``, at most ``wait`` seconds.

        Raises:
            OSError: the workspace stayed locked, or a control path is a
                link to a missing path (a command could create its target).
        """
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            _lock_shared(fd, wait)
            with self._lock:
                self._users[root] = self._users.get(root, 0) + 1
                made = self._made.setdefault(root, set())
                try:
                    args = _bind_args(fd, root, set(granted), made)
                except BaseException:
                    self._release(fd, root)
                    raise
        except BaseException:
            os.close(fd)
            raise
        return Lease(self, fd, root, args)

    def release(self, lease: Lease) -> None:
        """End ``lease`` (never blocks); the last command out clears placeholders."""
        with self._lock:
            try:
                self._release(lease.fd, lease.root)
            finally:
                os.close(lease.fd)

    def _release(self, fd: int, root: Path) -> None:
        """One command on ``root`` is over; the last one clears what this process made."""
        fcntl.flock(fd, fcntl.LOCK_UN)
        self._users[root] -= 1
        if self._users[root]:
            return
        del self._users[root]
        made = self._made.pop(root, set())
        if not made:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another process has a command running here: leave them
            return
        try:
            for name in sorted(made):
                _remove_if_empty(fd, name)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Lease:
    """One command's hold on a workspace (see :meth:`Placeholders.acquire`)."""

    owner: Placeholders
    fd: int
    root: Path
    args: list[str]
    """``--ro-bind`` pairs, to follow the workspace bind."""


def _lock_shared(fd: int, wait: float) -> None:
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise OSError("the workspace folder stayed locked (flock)") from None
            time.sleep(0.01)


def _bind_args(fd: int, root: Path, skip: set[str], made: set[str]) -> list[str]:
    args: list[str] = []
    for name in CONTROL_NAMES:
        if name in skip:
            continue
        path = str(root / name)
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            _create(fd, name)
            made.add(name)
            args += ["--ro-bind", path, path]
            continue
        if stat.S_ISLNK(info.st_mode) and not os.path.exists(path):
            raise OSError(f"{name} in the workspace is a link to a missing path; "
                          "refusing to run a command that could create it")  # fmt: skip
        args += ["--ro-bind", path, path]
    return args


def _create(fd: int, name: str) -> None:
    if name in CONTROL_DIRS:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o755, dir_fd=fd)
        return
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with contextlib.suppress(FileExistsError):
        os.close(os.open(name, flags, 0o644, dir_fd=fd))


def _remove_if_empty(fd: int, name: str) -> None:
    with contextlib.suppress(OSError):
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            os.rmdir(name, dir_fd=fd)  # fails (and stays) when not empty
        elif stat.S_ISREG(info.st_mode) and info.st_size == 0:
            os.unlink(name, dir_fd=fd)
