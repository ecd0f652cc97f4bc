"""Glob matching and a race-free, symlink-safe walk of a workspace subtree."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from personae.tools.workspace import Workspace

__all__ = ["WalkedFile", "glob_regex", "walk_files"]

_FILE_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", "node_modules", ".venv"})
"""Directories the recursive walk does not enter (noise for a model, and often huge)."""


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob (``*``, ``?``, ``[...]``, ``**``, ``{a,b}``) to a regex over POSIX paths.

    ``*`` and ``?`` never cross ``/``; ``**/`` matches zero or more directories.
    Raises ``re.error`` for a class that is not valid (``[z-a]``).
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            # As fnmatch: '!' negates, and a ']' right after '[' or '[!' is literal.
            j = i + 1
            negate = pattern.startswith("!", j)
            j += negate
            end = pattern.find("]", j + 1 if pattern.startswith("]", j) else j)
            if end == -1:
                out.append(re.escape(ch))
            else:
                body = _class_body(pattern[j:end])
                out.append(f"[{'^' if negate else ''}{body}]")
                i = end
        elif ch == "{":
            end = pattern.find("}", i)
            if end == -1:
                out.append(re.escape(ch))
            else:
                options = pattern[i + 1 : end].split(",")
                out.append("(?:" + "|".join(re.escape(o) for o in options) + ")")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _class_body(body: str) -> str:
    """A glob class body as a regex class body: ``a-z`` ranges kept, every other char escaped.

    Escaping each character (not only ``\\ [ ] ^``) keeps ``--``, ``&&``, ``~~`` and ``||``
    from reading as the set operations Python warns about (FutureWarning).
    """
    out: list[str] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            out.append(f"{re.escape(body[k])}-{re.escape(body[k + 2])}")
            k += 3
        else:
            out.append(re.escape(body[k]))
            k += 1
    return "".join(out)


@dataclass(frozen=True)
class WalkedFile:
    """A regular file found by :func:`walk_files`.

    ``dir_fd`` (the folder's descriptor) is valid only until the walk moves on:
    open the file with :meth:`open` right away.
    """

    path: Path
    """The file's path as walked (a link's own path for a symlinked file)."""
    dir_fd: int
    """Descriptor of the folder holding ``name``."""
    name: str
    """Name inside that folder."""
    target: Path | None = None
    """For a symlinked file: its resolved target inside the workspace."""

    def open(self, workspace: Workspace) -> int:
        """Open the file read-only without following links; it must still be a regular file.

        Raises ``OSError`` when it changed kind or vanished since it was listed.
        """
        if self.target is not None:  # a link to a file inside: open the target, race-free
            with workspace.parent_fd(self.target) as (parent, target_name):
                fd = os.open(target_name, _FILE_FLAGS, dir_fd=parent)
        else:
            fd = os.open(self.name, _FILE_FLAGS, dir_fd=self.dir_fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(f"{self.path} is no longer a regular file")
        return fd


def walk_files(workspace: Workspace, start: Path) -> Iterator[WalkedFile]:
    """Yield regular files under ``start`` (resolved, inside the workspace), sorted per directory.

    The walk runs on directory descriptors (``os.fwalk`` from a descriptor of
    ``start`` opened without following links): a folder swapped for a link
    while the walk runs is not entered. Symlinked directories are not entered;
    symlinked files are yielded only when their target stays inside the
    workspace (the yielded path is the link's own path).
    """
    try:
        with workspace.parent_fd(start) as (parent, name):
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode):
                yield WalkedFile(start, parent, name)
                return
    except ValueError:  # start is the root: a folder
        pass
    except OSError:
        return
    try:
        top = workspace.open_dir(start)
    except OSError:
        return
    try:
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(
            ".", dir_fd=top, follow_symlinks=False
        ):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            base = start / dirpath if dirpath != "." else start
            base = Path(os.path.normpath(base))
            for name in sorted(filenames):
                found = _classify(workspace, base / name, dir_fd, name)
                if found is not None:
                    yield found
    finally:
        os.close(top)


def _classify(workspace: Workspace, path: Path, dir_fd: int, name: str) -> WalkedFile | None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return WalkedFile(path, dir_fd, name)
    if not stat.S_ISLNK(st.st_mode):
        return None
    target = Path(os.path.realpath(path))
    if not workspace.contains(target) or not target.is_file():
        return None
    return WalkedFile(path, dir_fd, name, target)
