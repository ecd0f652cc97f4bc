"""The result file of a batch: one JSON line per finished task, appended atomically.

Every line is written with one ``write`` on a file opened ``O_APPEND`` and
``fsync``-ed before the task counts as done, so a driver killed at any moment
leaves whole lines (a torn last line, from a crash of the machine itself, is cut
off when the file is opened again). Tasks with a line are done: a restarted
batch skips them. One driver at a time: the file is locked (``flock``) while a
batch writes it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from personae.errors import UsageError

__all__ = ["ResultLog", "read_results"]


def read_results(path: Path) -> dict[str, dict[str, Any]]:
    """The result lines of ``path`` by task id (a later line for the same id wins)."""
    done: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return done
    with path.open("rb") as fh:
        for raw in fh:
            if not raw.endswith(b"\n"):
                break  # a torn last line: not a result
            try:
                row = json.loads(raw)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("id"), str):
                done[row["id"]] = row
    return done


class ResultLog:
    """Appends result lines to ``path`` (locked against a second batch on the same file)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._fd = -1

    def __enter__(self) -> ResultLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(self.path, flags, 0o644)
        except OSError as exc:
            raise UsageError(f"cannot open results: {exc.strerror}", file=self.path) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise UsageError("results must be a regular file", file=self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise UsageError("another batch is writing these results", file=self.path) from None
        self._fd = fd
        self._cut_torn_tail()
        return self

    def _cut_torn_tail(self) -> None:
        size = os.fstat(self._fd).st_size
        if size == 0:
            return
        keep = size
        while keep > 0:
            step = min(65536, keep)
            chunk = os.pread(self._fd, step, keep - step)
            cut = chunk.rfind(b"\n")
            if cut >= 0:
                keep = keep - step + cut + 1
                break
            keep -= step
        if keep != size:
            os.ftruncate(self._fd, keep)
            os.fsync(self._fd)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing releases the lock
            self._fd = -1

    def append(self, row: dict[str, Any]) -> None:
        """Write ``row`` as one line and make it durable before returning."""
        line = (json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        with self._lock:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(f"short write to {self.path}: {written} of {len(line)} bytes")
            os.fsync(self._fd)
