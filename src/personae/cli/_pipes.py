"""The process edge of output: a reader that went away (``personae run ... | head``)."""

from __future__ import annotations

import os
import sys

__all__ = ["BROKEN_PIPE_EXIT", "silence_stdout"]

BROKEN_PIPE_EXIT = 141
"""Exit code after the reader of stdout went away (128 + SIGPIPE, as a shell reports it)."""


def silence_stdout() -> None:
    """Point stdout at /dev/null, so nothing more (not even the exit flush) hits the pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (captured by a test runner)
        pass
