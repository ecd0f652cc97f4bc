"""The end state of a chain run: each step's state and the outcome the report is made from."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from personae.handover.child import exit_code_for
from personae.handover.schema import ResultStatus
from personae.workflow.spec import Workflow

__all__ = ["DONE", "ChainOutcome", "StepState", "StepStatus"]


class StepStatus(StrEnum):
    """A chain step's state in the checkpoint."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILURE = "failure"
    PARTIAL = "partial"
    SKIPPED = "skipped"
    """Not run: a step of an earlier stage did not finish."""


DONE = frozenset({StepStatus.SUCCESS, StepStatus.PARTIAL})
"""Step states that count as finished (a resumed chain does not run them again)."""


@dataclass(kw_only=True)
class StepState:
    """A step's state in the checkpoint."""

    status: StepStatus = StepStatus.PENDING
    """Where the step is (a checkpoint's string is read back as its member)."""
    handover: str | None = None
    """Its handover file."""
    pid: int | None = None
    """Child process (group) id while running."""
    started_at: str | None = None
    """When it started."""
    finished_at: str | None = None
    """When it ended."""
    attempts: int = 0
    """Attempts made."""
    duration: float = 0.0
    """Seconds it took."""
    output: str | None = None
    """Its output."""
    error: str | None = None
    """Its error."""
    artifacts: list[str] = field(default_factory=list)
    """Files it produced."""
    next_steps: list[str] = field(default_factory=list)
    """Next steps it suggested."""
    timed_out: bool = False
    """Whether its last attempt timed out."""
    adopted: bool = False
    """Results taken from a child that outlived a killed parent."""

    def __post_init__(self) -> None:
        self.status = StepStatus(self.status)  # an unknown state raises ValueError


@dataclass(kw_only=True)
class ChainOutcome:
    """The end state of a chain run."""

    workflow: Workflow
    """The workflow."""
    state_dir: Path
    """Where checkpoint, handovers and report live."""
    steps: dict[str, StepState]
    """Every step's state."""
    report_path: Path
    """The aggregated Markdown report."""
    resumed: list[str] = field(default_factory=list)
    """Steps skipped because a checkpoint had them finished."""

    @property
    def status(self) -> ResultStatus:
        """success, partial or failure."""
        states = [s.status for s in self.steps.values()]
        if all(s is StepStatus.SUCCESS for s in states):
            return "success"
        if all(s in DONE for s in states):
            return "partial"
        return "failure"

    @property
    def exit_code(self) -> int:
        """0 success, 5 partial, 4 a step timed out, 3 failure."""
        timed_out = any(s.status is StepStatus.FAILURE and s.timed_out for s in self.steps.values())
        return exit_code_for(self.status, timed_out=timed_out)
