"""How much of a parent's context a child agent receives (a persona's ``context:`` mode).

Its own module so that the events, budget reports and personas that name a mode can
import it without the persona loader or the context engine.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ContextMode"]


class ContextMode(StrEnum):
    """How much of the parent's context a persona receives when spawned or handed work."""

    ISOLATED = "isolated"
    """Only the task."""
    BRIEF = "brief"
    """Task + conversation summary + directive constraints."""
    SUMMARY_RECENT = "summary_recent"
    """Task + summary + recent messages."""
    FORK = "fork"
    """The shared sections of the parent's snapshot (never its persona prompt or execution
    block)."""

    @property
    def gives(self) -> str:
        """What a child spawned in this mode receives, in words a parent (or a user) reads
        before choosing it."""
        return _CONTEXT_GIVES[self]


_CONTEXT_GIVES = {
    ContextMode.ISOLATED: "only the task",
    ContextMode.BRIEF: "the task, the conversation summary, the directive and the parent's name",
    ContextMode.SUMMARY_RECENT: (
        "the task, the conversation summary, the directive, the parent's name and the last 6 "
        "messages"
    ),
    ContextMode.FORK: (
        "the task and the shared sections of the parent's context (never its persona prompt)"
    ),
}
