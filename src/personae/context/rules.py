"""What fitting did to a section, as a typed value rendered once for reports."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

__all__ = ["Action", "Bound", "Rule"]


class Action(StrEnum):
    """The form a section was rendered in."""

    FULL = "full"
    """Whole."""
    PINNED = "pinned"
    """Whole, never truncated."""
    ABSENT = "absent"
    """No content: not rendered."""
    REMOVED = "removed"
    """Not even its smallest form fitted: not rendered."""
    EVICTED = "evicted"
    """Conversation: older exchanges left out (a notice says how many)."""
    SHRUNK = "shrunk latest turn"
    """Conversation: the latest turn's outputs shortened."""
    SUMMARY_FILE = "summary file"
    """Its summary file in place of the whole."""
    OUTLINE = "outline"
    """The first part whole, the rest outlined."""
    CUT = "cut"
    """Cut with a notice."""
    DROPPED = "dropped"
    """A one-line notice in its place."""


Bound = Literal["cap", "budget", "share"]
"""What made the section smaller: its own cap, the budget, or (a pinned section) its
share of the budget."""


@dataclass(frozen=True, slots=True)
class Rule:
    """What happened to a section: the form, of what, and what bounded it."""

    action: Action
    """The form rendered."""
    of_summary: bool = False
    """The outline or cut is of the section's summary file (not of the whole)."""
    bound: Bound | None = None
    """``cap``, ``budget`` or ``share`` when the section was made smaller; ``None``
    otherwise."""
    cap: int | None = None
    """The cap, when ``bound`` is ``cap``; the share in tokens, when it is ``share``."""

    def bounded(self, bound: Bound | None, cap: int | None = None) -> Rule:
        """This rule bounded by ``bound`` (a whole form stays unbounded)."""
        if self.action is Action.FULL or bound is None:
            return Rule(self.action, self.of_summary)
        return Rule(self.action, self.of_summary, bound, cap if bound != "budget" else None)

    def __str__(self) -> str:
        what = f"summary file {self.action}" if self.of_summary else str(self.action)
        if self.bound == "cap":
            return f"cap {self.cap}: {what}"
        if self.bound == "share":
            return f"share {self.cap}: {what}"
        if self.bound == "budget":
            return f"budget: {what}"
        return what


FULL = Rule(Action.FULL)
"""The whole content."""
