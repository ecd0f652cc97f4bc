"""File helpers shared by every part of personae: atomic writes, safe reads.

A write goes to a fresh temp file beside the target (``O_EXCL | O_NOFOLLOW``),
is fsynced, then renamed over the target with ``os.replace``: readers see the
old file or the new one, never half of either.

A read of an input file (handover, config, profiles, scenario, workflow,
memory, persona) goes through :func:`read_regular`: a FIFO, device, socket or
directory is refused at once instead of blocking the process forever.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from personae.errors import UsageError

__all__ = [
    "NotRegularFileError",
    "file_kind",
    "locked",
    "private_dir",
    "read_input",
    "read_regular",
    "remove_stale_temps",
    "write_atomic",
]


_TEMP = re.compile(r"^\.(?P<name>.+)\.[0-9a-f]{12}\.tmp$")


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


class NotRegularFileError(OSError):
    """An input path that is not a regular file (FIFO, device, socket, directory) or too large."""


def file_kind(mode: int) -> str:
    """What a file mode says a path is, for messages (``a FIFO``, ``a directory`` ...)."""
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISREG, "a regular file"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def _refuse(path: Path | str, mode: int) -> OSError:
    if stat.S_ISDIR(mode):
        return IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    return NotRegularFileError(errno.EINVAL, f"not a regular file ({file_kind(mode)})", str(path))


def read_regular(path: Path | str, *, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (symlinks followed), never blocking.

    The path is stat'ed first (a device is never opened), then opened with
    ``O_NONBLOCK`` (a FIFO swapped in meanwhile does not wait for a writer)
    and checked again on the descriptor. Raises ``IsADirectoryError`` for a
    folder, :class:`NotRegularFileError` for anything else that is not a
    regular file or for one larger than ``max_bytes``; other ``OSError``
    (missing, permission) pass through.
    """
    before = os.stat(path)
    if not stat.S_ISREG(before.st_mode):
        raise _refuse(path, before.st_mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _refuse(path, info.st_mode)
        if max_bytes is not None and info.st_size > max_bytes:
            raise _too_large(path, max_bytes)
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if max_bytes is not None and len(data) > max_bytes:
        raise _too_large(path, max_bytes)
    return data


def read_input(path: Path, *, max_bytes: int, what: str, size: str) -> bytes:
    """:func:`read_regular` for an input file named ``what`` (``workflow``, ``task file``):
    every refusal is one :class:`~personae.errors.UsageError` naming the file
    (``{what} is larger than {size}``, ``cannot read {what}: {reason}``)."""
    try:
        return read_regular(path, max_bytes=max_bytes)  # a FIFO is refused, never waited on
    except NotRegularFileError as exc:
        if exc.errno == errno.EFBIG:
            raise UsageError(f"{what} is larger than {size}", file=path) from None
        raise UsageError(f"cannot read {what}: {exc.strerror}", file=path) from None
    except OSError as exc:
        raise UsageError(f"cannot read {what}: {exc.strerror}", file=path) from None


def _too_large(path: Path | str, max_bytes: int) -> NotRegularFileError:
    return NotRegularFileError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))


def private_dir(path: Path) -> Path:
    """Create ``path`` (and parents) and make it 0700, whatever the umask.

    An existing folder owned by the user loses its group and other bits; one
    owned by someone else is left alone.
    """
    path.mkdir(parents=True, exist_ok=True)
    info = os.stat(path)
    mode = stat.S_IMODE(info.st_mode)
    if info.st_uid == os.geteuid() and mode != 0o700:
        os.chmod(path, 0o700)
    return path


@contextlib.contextmanager
def locked(lock_path: Path, *, timeout: float) -> Iterator[None]:
    """Hold the file lock ``lock_path`` (``filelock``); the lock file is removed on release.

    The file is unlinked while still held, as the last step: a process
    already waiting on it then finds it unlinked when it gets the lock and
    retries on a fresh file (``filelock`` checks ``st_nlink``), so mutual
    exclusion holds and no ``.lock`` file stays behind. Raises
    ``filelock.Timeout`` after ``timeout`` seconds.
    """
    # local import: filelock loads only when a lock is taken (fsutil sits under every entry point)
    from filelock import FileLock

    with FileLock(str(lock_path), timeout=timeout):
        try:
            yield
        finally:
            with contextlib.suppress(OSError):
                os.unlink(lock_path)


def remove_stale_temps(folder: Path, name: str | None = None) -> int:
    """Remove temp files :func:`write_atomic` left in ``folder`` (for ``name``, or any).

    A temp file outlives its write only when the writer was killed. Call this
    only while holding the lock every writer of those files takes, so no
    write in progress loses its temp file. Returns how many were removed.
    """
    removed = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for entry in entries:
        match = _TEMP.match(entry.name)
        if match is None or (name is not None and match.group("name") != name[:100]):
            continue
        with contextlib.suppress(OSError):
            if entry.is_file(follow_symlinks=False) or entry.is_symlink():
                os.unlink(entry.path)
                removed += 1
    return removed
