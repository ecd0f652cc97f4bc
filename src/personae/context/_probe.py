"""What reading the project files depended on, so an unchanged project is not read again.

Every path the readers consult (files read, files and folders found missing,
folders listed) is recorded with its identity (mode, device, inode,
modification time in ns, size) while a bundle of reads is computed. The next
time the same bundle is asked for, each recorded path is stat'ed again; when
none changed, the earlier result is returned. A folder's modification time
changes when an entry is added, removed or renamed, so a listing is covered by
its folder's identity.
"""

from __future__ import annotations

import os
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
    token = _RECORDING.set(seen)
    try:
        value = compute()
    finally:
        _RECORDING.reset(token)
    if key not in memo and len(memo) >= _MAX_BUNDLES:
        memo.clear()  # rare: a session reads many task and step combinations
    # Sorted, so a folder comes before the paths under it (see _unchanged).
    memo[key] = (
        tuple(sorted((p, f, i, os.path.dirname(p)) for (p, f), i in seen.items())),
        value,
    )
    return value


def _exists(where: str, follow: bool) -> bool:
    """Whether ``where`` can be stat'ed, as ``_ident`` sees it, without raising (cheaper
    for the missing paths a project usually has)."""
    try:
        return os.access(where, os.F_OK, effective_ids=True, follow_symlinks=follow)
    except (NotImplementedError, OSError, ValueError):
        # NotImplementedError: this platform's access() takes neither flag; ValueError: a
        # NUL in the path. stat tells (and fails) as _ident always did.
        return _ident(where, follow) is not None


def _unchanged(entries: Iterable[tuple[str, bool, Ident, str]]) -> bool:
    """True when every path still has its recorded identity. A path recorded missing
    under a folder that is still missing is missing too: it is not stat'ed again."""
    gone: set[str] = set()
    for where, follow, ident, parent in entries:
        if ident is None:
            if parent in gone:
                continue
            if _exists(where, follow):
                return False
            gone.add(where)
        elif _ident(where, follow) != ident:
            return False
    return True
