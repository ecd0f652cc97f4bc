"""The command line that runs personae itself in a child process.

Children (handover runs, batch tasks, the doctor's MCP probe) run this
interpreter with ``-m personae``, never a ``personae`` found on ``PATH``: the
child is the same installation as its parent whatever the environment.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["as_typed", "personae_argv"]

_PREFIX = ("-m", "personae")


def personae_argv(*args: str) -> list[str]:
    """``python -m personae ARGS`` with this process's interpreter."""
    return [sys.executable, *_PREFIX, *args]


def as_typed(argv: Sequence[str]) -> list[str]:
    """``argv`` as a user would type it: ``personae ARGS`` for a :func:`personae_argv`
    command line, any other command as it is."""
    if list(argv[1:3]) == list(_PREFIX):
        return ["personae", *argv[3:]]
    return list(argv)
