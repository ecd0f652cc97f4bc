"""Line-ending facts about a persona or skill file that its normalized text no longer shows."""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["has_crlf"]

_LIMIT = 8 * 1024 * 1024


def has_crlf(path: Path) -> bool:
    """Whether ``path`` has CR line endings (False when it is not a readable regular file).

    Called after the loader read the file; opened without blocking and checked to
    be a regular file again, so a path swapped for a FIFO can never hang it.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return b"\r" in os.read(fd, _LIMIT)
    except OSError:
        return False
    finally:
        os.close(fd)
