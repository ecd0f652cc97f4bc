"""The team runtime: Manager, Worker, Validator, completion signals, dispatch, sub-agents."""

from personae.team.dispatch import NextStep, StepAction, SubtaskBudget, next_step
from personae.team.events import Event, EventBus, EventKind
from personae.team.loop import TeamConfig, TeamLoop, TurnResult
from personae.team.loopdetect import LoopDetector
from personae.team.runtime import Runtime, TreeUsage
from personae.team.signals import (
    BlockerType,
    CompletionSignal,
    Confidence,
    InvolvementLevel,
    Plan,
    Strategy,
    Subtask,
    ValidationResult,
    WorkerResult,
)
from personae.team.subagents import Spawner, SubagentOutcome
from personae.team.turn_context import ContextView, TurnContext
from personae.tools.records import ToolCallRecord

__all__ = [
    "BlockerType",
    "CompletionSignal",
    "Confidence",
    "ContextView",
    "Event",
    "EventBus",
    "EventKind",
    "InvolvementLevel",
    "LoopDetector",
    "NextStep",
    "Plan",
    "Runtime",
    "Spawner",
    "StepAction",
    "Strategy",
    "SubagentOutcome",
    "Subtask",
    "SubtaskBudget",
    "TeamConfig",
    "TeamLoop",
    "ToolCallRecord",
    "TreeUsage",
    "TurnContext",
    "TurnResult",
    "ValidationResult",
    "WorkerResult",
    "next_step",
]
