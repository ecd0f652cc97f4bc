"""The typed results the team passes around: plan, work, validation, completion signal."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from personae.tools.records import ToolCallRecord

__all__ = [
    "BlockerType",
    "CompletionSignal",
    "Confidence",
    "InvolvementLevel",
    "Plan",
    "Strategy",
    "SubagentStatus",
    "Subtask",
    "SubtaskResult",
    "SubtaskStatus",
    "ValidationResult",
    "WorkerResult",
]


class InvolvementLevel(StrEnum):
    """How deeply the validator checks a task (from the task type only)."""

    MINIMAL = "minimal"
    STANDARD = "standard"
    THOROUGH = "thorough"


class Confidence(StrEnum):
    """Validator's confidence the subtask is done."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
    NONE = "none"


class BlockerType(StrEnum):
    """What stands in the way of completing a subtask."""

    TOOL_FAILURE = "tool_failure"
    HALLUCINATION = "hallucination"
    SCOPE_DRIFT = "scope_drift"
    PARTIAL = "partial"
    LOOP = "loop"
    CAPABILITY_GAP = "capability_gap"


class Strategy(StrEnum):
    """Corrective strategy for a subtask that was not approved."""

    RETRY = "retry"
    REPHRASE = "rephrase"
    DECOMPOSE = "decompose"
    SKIP = "skip"
    ESCALATE = "escalate"


class SubtaskStatus(StrEnum):
    """How a planned subtask ended."""

    VALIDATED = "validated"
    """The validator approved it."""
    PARTIAL = "partial"
    """Retries ran out with progress: kept for synthesis, marked not validated."""
    UNVALIDATED = "unvalidated"
    """The validator was unavailable (infrastructure error): kept, not validated."""
    SKIPPED = "skipped"
    """Dispatch (or the request cap) skipped it."""
    ESCALATED = "escalated"
    """Dispatch handed it back to the user."""


SubagentStatus: TypeAlias = Literal["success", "partial", "failed", "limit"]
"""How a sub-agent ended: its task done, part of it, an error, or a limit (steps, requests)."""


class CompletionSignal(BaseModel):
    """The validator's per-subtask assessment: approved or not, why, and what to do next."""

    model_config = ConfigDict(frozen=True)

    confidence: Confidence
    """How sure the validator is that the subtask is complete."""
    progress_made: bool
    """Did the worker make measurable forward progress?"""
    blocker_type: BlockerType | None = None
    """What blocks completion, if anything."""
    suggested_strategy: Strategy | None = None
    """What the validator suggests doing next."""


@dataclass(frozen=True, kw_only=True)
class SubtaskResult:
    """How one planned subtask of a run ended (part of the run's result and of its
    ``final`` event)."""

    number: int
    """Subtask number (from 1)."""
    description: str
    """What the Manager asked for."""
    status: SubtaskStatus
    """validated, partial, unvalidated, skipped or escalated."""
    result: str
    """The accepted (or last) worker result (empty: no worker ran it)."""
    reason: str
    """Why it was not validated (empty: it was)."""
    attempts: int
    """Worker attempts made (0: it was skipped before any)."""
    signal: CompletionSignal | None
    """The validator's completion signal on the last attempt (``None``: never validated)."""


class ValidationResult(BaseModel):
    """The validator's verdict on one piece of work (ARCHITECTURE.md contract)."""

    model_config = ConfigDict(frozen=True)

    approved: bool
    """The work is accepted."""
    requirements_met: bool
    """Every requirement of the subtask is met."""
    issues: list[str] = Field(default_factory=list)
    """Problems found."""
    next_action: str = ""
    """What should happen next (free text)."""
    involvement_level: InvolvementLevel = InvolvementLevel.STANDARD
    """How deeply this was validated."""
    completion_signal: CompletionSignal
    """Structured assessment used for dispatch."""
    correction: str = ""
    """The validator's correction instruction, written with the shared context (may be empty)."""


class Subtask(BaseModel):
    """One step of the manager's plan."""

    model_config = ConfigDict(frozen=True)

    description: str
    """What to do."""
    requirements: list[str] = Field(default_factory=list)
    """What must be true for it to count as done."""
    persona: str | None = None
    """Persona to run it (``None``: the run's persona)."""
    required_tools: list[str] = Field(default_factory=list)
    """Tools that must be used."""


class Plan(BaseModel):
    """The manager's plan (structured output)."""

    model_config = ConfigDict(frozen=True)

    subtasks: list[Subtask] = Field(min_length=1)
    """Subtasks in order."""
    rationale: str = ""
    """Why this plan."""


class WorkerResult(BaseModel):
    """What a worker returns for one subtask."""

    model_config = ConfigDict(frozen=True)

    success: bool
    """The worker finished (no crash, no step-limit stop)."""
    result: str
    """The worker's final message."""
    tools_used: list[str] = Field(default_factory=list)
    """Distinct tool names used, in first-use order."""
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    """Every tool call with its arguments."""
    failed_tools: list[ToolCallRecord] = Field(default_factory=list)
    """Tool calls that failed, with their errors."""
    error: str | None = None
    """Why the worker stopped, when it did not finish."""
    loop_detected: bool = False
    """The same tool call was repeated (detected in code)."""
    usage: dict[str, int] = Field(default_factory=dict)
    """requests, input_tokens, output_tokens of this work."""
