"""Atomic file writes shared by every part of personae.

A write goes to a fresh temp file beside the target (``O_EXCL | O_NOFOLLOW``),
is fsynced, then renamed over the target with ``os.replace``: readers see the
old file or the new one, never half of either.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

__all__ = ["write_atomic"]


def _create_temp(parent: Path, name: str, dir_fd: int | None = None) -> tuple[int, str]:
    """Create a fresh temp file beside the target; the kernel gives it 0666 & ~umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    flags |= getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = str(parent / f".{name[:100]}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary file name in {parent}")


def write_atomic(
    path: Path,
    data: bytes,
    *,
    mode: int | None = None,
    new_mode: int | None = None,
    dir_fd: int | None = None,
) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, ``os.replace``).

    Permission bits: ``mode`` forces them (e.g. 0o600 for private files);
    otherwise an existing file keeps its bits, and a new file gets ``new_mode``,
    or the normal mode for user files (``0666 & ~umask``) when that is ``None``.

    With ``dir_fd`` (a descriptor of the parent folder) ``path`` is a bare name
    in that folder: the temp file is created and renamed relative to the
    descriptor, and a symlink at the name is replaced, never followed.
    """
    keep: int | None = mode
    if keep is None:
        try:
            st = os.stat(path, dir_fd=dir_fd, follow_symlinks=dir_fd is None)
            keep = new_mode if stat.S_ISLNK(st.st_mode) else stat.S_IMODE(st.st_mode)
        except FileNotFoundError:
            keep = new_mode
    fd, tmp = _create_temp(path.parent, path.name, dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            if keep is not None:
                os.fchmod(fh.fileno(), keep)
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
