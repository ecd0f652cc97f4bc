"""What a run on a handover produced, turn by turn (no handover model loads for it)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HandoverTurn", "HandoverWork"]


@dataclass(frozen=True, kw_only=True)
class HandoverTurn:
    """What one run turn on a handover produced (the parts its results keep)."""

    done: bool
    """Every subtask of the turn was validated."""
    answer: str
    """The turn's final answer."""
    files: Sequence[str] = ()
    """Files the turn wrote (result artifacts)."""
    warnings: Sequence[str] = ()
    """The turn's warnings (the results' next steps)."""


@dataclass(kw_only=True)
class HandoverWork:
    """The turns of a run on a handover, collected by :func:`working_on`."""

    turns: list[HandoverTurn] = field(default_factory=list)
    """Turns finished so far, in order."""
    written: Path | None = None
    """The file the results went to (set once the work ended well)."""
    new_warnings: list[str] = field(default_factory=list)
    """Warnings that came up while finishing (not shown before)."""

    def add(self, turn: HandoverTurn) -> None:
        """Record a finished turn."""
        self.turns.append(turn)
