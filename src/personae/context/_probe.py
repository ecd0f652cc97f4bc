"""What reading the project files depended on, so an unchanged project is not read again.

Every path the readers consult (files read, files and folders found missing,
folders listed) is recorded with its identity (mode, device, inode,
modification time in ns, size) while a bundle of reads is computed. The next
time the same bundle is asked for, each recorded path is stat'ed again; when
none changed, the earlier result is returned. A folder's modification time
changes when an entry is added, removed or renamed, so a listing is covered by
its folder's identity, and so is a path found missing in a recorded folder whose
modification time was settled (older than any file system's timestamp step) when
the bundle was computed: an entry created there later gives the folder a later
time. Such a path is not checked on its own (unless a link is in its place: a
dangling link's target may appear elsewhere).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Hashable, Iterable
from contextvars import ContextVar
from typing import Any, TypeVar

__all__: list[str] = []

T = TypeVar("T")

Ident = tuple[int, int, int, int, int] | None
"""(mode, device, inode, mtime_ns, size) of a path; ``None``: it could not be stat'ed."""

_RECORDING: ContextVar[dict[tuple[str, bool], Ident] | None] = ContextVar(
    "personae_context_probe", default=None
)


def _ident(where: str, follow: bool) -> Ident:
    try:
        st = os.stat(where) if follow else os.lstat(where)
    except (OSError, ValueError):
        return None
    return (st.st_mode, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def record(where: str, ident: Ident, *, follow: bool = True) -> None:
    """Note that the bundle being computed consulted ``where`` (seen as ``ident``)."""
    seen = _RECORDING.get()
    if seen is not None:
        seen.setdefault((where, follow), ident)


def probe(where: os.PathLike[str] | str, *, follow: bool = True) -> Ident:
    """The identity of ``where`` (``None``: missing or not stat-able), recorded."""
    path = os.fspath(where)
    got = _ident(path, follow)
    record(path, got, follow=follow)
    return got


_MAX_BUNDLES = 32

_SETTLED_NS = 3_000_000_000
"""A folder whose modification time is older than this when a bundle is computed has a
settled time: an entry added later gets it a later time on any file system (FAT stores
times in 2 s steps; the others in 1 s or finer)."""

Entry = tuple[str, bool, Ident, str, bool]
"""(path, follow, identity, parent folder, covered by the parent's identity)."""


def current(memo: dict[Hashable, Any], key: Hashable) -> Any:
    """The result :func:`remembered` holds for ``key`` in ``memo`` while no path it
    consulted changed; ``None``: none held, or a path changed."""
    got = memo.get(key)
    return got[1] if got is not None and _unchanged(got[0]) else None


def remembered(memo: dict[Hashable, Any], key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, or its earlier result for ``key`` in ``memo`` (a session's
    window's) when no path it consulted changed."""
    got = current(memo, key)
    if got is not None:
        return got  # type: ignore[no-any-return]
    seen: dict[tuple[str, bool], Ident] = {}
    started = time.time_ns()
    token = _RECORDING.set(seen)
    try:
        value = compute()
    finally:
        _RECORDING.reset(token)
    if key not in memo and len(memo) >= _MAX_BUNDLES:
        memo.clear()  # rare: a session reads many task and step combinations
    memo[key] = (_entries(seen, started), value)
    return value


def _entries(seen: dict[tuple[str, bool], Ident], started: int) -> tuple[Entry, ...]:
    """The recorded paths, sorted so a folder comes before the paths under it (see
    ``_unchanged``). A missing path is covered by its folder when the folder was
    recorded (followed) with a time settled before the reads began (``started``), and
    nothing is at the path now: after the folder's stat, so an entry created between
    that stat and this check is not covered."""
    settled = {
        p
        for (p, f), i in seen.items()
        if f and i is not None and stat.S_ISDIR(i[0]) and started - i[3] > _SETTLED_NS
    }
    out: list[Entry] = []
    for (p, f), i in seen.items():
        parent = os.path.dirname(p)
        covered = i is None and parent in settled and not _lexists(p)
        out.append((p, f, i, parent, covered))
    return tuple(sorted(out))


def _lexists(where: str) -> bool:
    """Whether anything (a dangling link too) is at ``where``."""
    try:
        os.lstat(where)
    except (OSError, ValueError):
        return False
    return True


def _exists(where: str, follow: bool) -> bool:
    """Whether ``where`` can be stat'ed, as ``_ident`` sees it, without raising (cheaper
    for the missing paths a project usually has)."""
    try:
        return os.access(where, os.F_OK, effective_ids=True, follow_symlinks=follow)
    except (NotImplementedError, OSError, ValueError):
        # NotImplementedError: this platform's access() takes neither flag; ValueError: a
        # NUL in the path. stat tells (and fails) as _ident always did.
        return _ident(where, follow) is not None


def _unchanged(entries: Iterable[Entry]) -> bool:
    """True when every path still has its recorded identity. A path recorded missing
    under a folder that is still missing, or covered by its folder (checked before it,
    unchanged), or missing without following links, is missing too: it is not stat'ed
    again. A path recorded both ways (without following links first, in sort order)
    that is not a link is stat'ed once: following it sees the same."""
    gone: set[str] = set()
    plain: tuple[str, Ident] | None = None
    for where, follow, ident, parent, covered in entries:
        if ident is None:
            if not (covered or parent in gone or where in gone) and _exists(where, follow):
                return False
            gone.add(where)
        elif follow and plain is not None and plain[0] == where:
            if plain[1] != ident:
                return False
        else:
            now = _ident(where, follow)
            if now != ident:
                return False
            plain = None if follow or stat.S_ISLNK(ident[0]) else (where, now)
    return True
