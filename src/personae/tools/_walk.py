"""Glob matching and a symlink-safe walk of a workspace subtree."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

from personae.tools.workspace import Workspace

__all__ = ["glob_regex", "walk_files"]

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


def walk_files(workspace: Workspace, start: Path) -> Iterator[Path]:
    """Yield regular files under ``start`` (resolved, inside the workspace), sorted per directory.

    Symlinked directories are not entered; symlinked files are yielded only
    when their target stays inside the workspace (the yielded path is the
    link's own path).
    """
    if start.is_file():
        yield start
        return
    for dirpath, dirnames, filenames in os.walk(start, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        base = Path(dirpath)
        for name in sorted(filenames):
            path = base / name
            if path.is_symlink():
                target = Path(os.path.realpath(path))
                if not workspace.contains(target) or not target.is_file():
                    continue
            elif not path.is_file():
                continue
            yield path
