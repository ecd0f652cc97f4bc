"""Checks on folders named on the command line (``--root`` and friends)."""

from __future__ import annotations

from pathlib import Path

from personae.errors import UsageError

__all__ = ["existing_dir"]


def existing_dir(path: Path, flag: str = "--root") -> Path:
    """``path`` if it is an existing folder; else a UsageError naming it and ``flag``."""
    if not path.exists():
        raise UsageError("no such folder", file=path, field=flag)
    if not path.is_dir():
        raise UsageError("not a folder", file=path, field=flag)
    return path
