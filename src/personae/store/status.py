"""The one status of a run and the exit code ``personae run`` ends with for it.

The store's ``status`` column, the ``final`` event of ``personae run --json``, the Python
API's :class:`personae.TeamResult`, the viewer and the OpenTelemetry export all use
:class:`RunStatus`; nothing else names a run's outcome.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal, TypeAlias

__all__ = ["EXIT_PARTIAL", "EXIT_USAGE", "OK_STATUSES", "CallRole", "RunStatus"]

CallRole: TypeAlias = Literal["manager", "worker", "validator", "subagent", "summarizer"]
"""Who made a model call: a team role, a sub-agent, or the conversation summarizer."""


class RunStatus(StrEnum):
    """How a run stands or ended: the one status of a run, the same in the store (the
    ``status`` column), ``personae run --json`` (the ``final`` event), the Python API's
    result, the viewer and the OpenTelemetry export; :attr:`exit_code` is the CLI's."""

    RUNNING = "running"
    DONE = "done"
    """Every subtask validated."""
    PARTIAL = "partial"
    """Some or none of the subtasks validated (the answer says which were not)."""
    FAILED = "failed"
    """An error ended the run (the model, the provider, a tool set-up ...)."""
    CANCELLED = "cancelled"
    """Interrupted (Ctrl-C, a signal, a cancel token) or out of time."""
    CRASHED = "crashed"
    """Its process ended mid-run (marked by :meth:`RunStore.reconcile`)."""

    @property
    def exit_code(self) -> int:
        """``personae run``'s exit code for a run that ended so: done 0, failed (or
        crashed) 1, partial or not validated 5 (as ``personae handover run``'s partial),
        cancelled 130 (2 is bad usage, before any run)."""
        return _EXIT_CODES[self]


OK_STATUSES = frozenset({RunStatus.DONE, RunStatus.RUNNING})
"""The statuses that are no error (an OpenTelemetry trace marks every other one ERROR,
a partial run too: work was left undone)."""

EXIT_USAGE = 2
"""Exit code of bad usage (a wrong flag or argument): nothing ran."""

EXIT_PARTIAL = 5
"""Exit code of a run (or handover, or chain) that finished with work not validated."""

_EXIT_CODES: dict[RunStatus, int] = {
    RunStatus.RUNNING: 1,
    RunStatus.DONE: 0,
    RunStatus.PARTIAL: EXIT_PARTIAL,
    RunStatus.FAILED: 1,
    RunStatus.CANCELLED: 130,
    RunStatus.CRASHED: 1,
}
