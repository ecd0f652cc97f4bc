"""Confined file discovery and reading for the loaders (symlinks resolved)."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from personae.fsutil import NotRegularFileError, read_regular
from personae.persona.problems import Problem

__all__ = ["MAX_READ_BYTES", "confined_dir", "iter_files", "read_confined"]

MAX_READ_BYTES = 8 * 1024 * 1024
"""Largest persona, skill or JSON file the loaders read."""

_SKIP_NAMES = {"readme.md", "license.md", "changelog.md", "contributing.md"}


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):
        return False


def iter_files(
    folder: Path, root: Path, problems: list[Problem], *, pattern: str = "*.md"
) -> Iterator[Path]:
    """Files under ``folder`` (recursively, sorted) matching ``pattern``.

    Symlinked folders or files whose target lies outside ``root`` are reported
    as errors and skipped; README/LICENSE-style files are skipped.
    """
    if not folder.is_dir():
        return
    seen: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=True):
        here = Path(dirpath)
        real = here.resolve()
        if real in seen:
            dirnames[:] = []
            continue
        seen.add(real)
        keep = []
        for d in sorted(dirnames):
            sub = here / d
            if d.startswith("."):
                continue
            if not _inside(sub, root):
                problems.append(_escape(sub, root))
                continue
            keep.append(d)
        dirnames[:] = keep
        for name in sorted(filenames):
            path = here / name
            if not path.match(pattern) or name.lower() in _SKIP_NAMES:
                continue
            if path.is_symlink() and not _inside(path, root):
                problems.append(_escape(path, root))
                continue
            yield path


def confined_dir(folder: Path, root: Path, problems: list[Problem]) -> bool:
    """Whether ``folder`` is a directory that resolves inside ``root``.

    A folder (or symlink to one) leading outside ``root`` is reported as an error.
    """
    if not folder.is_dir():
        return False
    if not _inside(folder, root):
        problems.append(_escape(folder, root))
        return False
    return True


def _escape(path: Path, root: Path) -> Problem:
    try:
        target = str(path.resolve())
    except (OSError, RuntimeError):
        target = os.readlink(path)
    return Problem(
        file=path,
        line=None,
        severity="error",
        message=f"symlink escapes the project root {root} (points to {target}); skipped",
    )


def read_confined(path: Path, root: Path, problems: list[Problem]) -> str | None:
    """The UTF-8 text of ``path``, or ``None`` with an error problem when it cannot be read.

    The resolved path (symlinks anywhere in it) must lie inside ``root``; it
    must be a regular file (not a FIFO or device) of at most ``MAX_READ_BYTES``.
    """
    if (path.is_symlink() or path.exists()) and not _inside(path, root):
        problems.append(_escape(path, root))
        return None
    reason: str
    try:
        # Never blocks: a FIFO or device is refused before anything waits on it.
        text = read_regular(path, max_bytes=MAX_READ_BYTES).decode("utf-8")
        # Universal newlines, as text-mode reading gives (CRLF files load the same).
        return text.replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        reason = f"not valid UTF-8 (byte {exc.start})"
    except NotRegularFileError as exc:
        reason = str(exc.strerror)
        if exc.errno == errno.EFBIG:
            reason = f"larger than {MAX_READ_BYTES // (1024 * 1024)} MiB"
    except OSError as exc:
        reason = exc.strerror or exc.__class__.__name__
    problems.append(
        Problem(file=path, line=None, severity="error", message=f"cannot read file: {reason}")
    )
    return None
