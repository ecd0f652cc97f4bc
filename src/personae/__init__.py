"""personae: persona and context engine for multi-agent LLM systems.

The front door is lazy: ``import personae`` loads nothing heavy, so small
entry points (the hook gate runs on every tool call) start fast. Each name is
imported from its module on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from personae._lazy import lazy_front
from personae._version import VERSION

if TYPE_CHECKING:
    from personae.api.context import Context, FittedMessages, assemble, fit_messages
    from personae.api.handover import (
        ChainOptions,
        HandoverRunOptions,
        HandoverSpec,
        create_handover,
        load_handover,
        run_chain,
        run_handover,
    )
    from personae.api.results import (
        AnswerDelta,
        Limits,
        RunEnd,
        RunResult,
        SubtaskResult,
        TeamResult,
        Usage,
    )
    from personae.api.runs import areplay_run, compare_runs, diff_calls, replay_run
    from personae.api.team import CancelToken, Team
    from personae.errors import PersonaeError, RunError, UsageError
    from personae.persona import Cast, ContextMode, Persona, Skill
    from personae.project import Project
    from personae.store import Store
    from personae.team.events import Event, EventKind
    from personae.team.hooks import ModelCall, ModelReply, RunHooks, ToolOutcome, ToolUse, Veto
    from personae.team.structured import AnswerTypeError
    from personae.tools.base import Tool
    from personae.tools.function import function_tool

__all__ = [
    "AnswerDelta",
    "AnswerTypeError",
    "CancelToken",
    "Cast",
    "ChainOptions",
    "Context",
    "ContextMode",
    "Event",
    "EventKind",
    "FittedMessages",
    "HandoverRunOptions",
    "HandoverSpec",
    "Limits",
    "ModelCall",
    "ModelReply",
    "Persona",
    "PersonaeError",
    "Project",
    "RunEnd",
    "RunError",
    "RunHooks",
    "RunResult",
    "Skill",
    "Store",
    "SubtaskResult",
    "Team",
    "TeamResult",
    "Tool",
    "ToolOutcome",
    "ToolUse",
    "Usage",
    "UsageError",
    "Veto",
    "__version__",
    "areplay_run",
    "assemble",
    "compare_runs",
    "create_handover",
    "diff_calls",
    "fit_messages",
    "function_tool",
    "load_handover",
    "replay_run",
    "run_chain",
    "run_handover",
]

__version__ = VERSION

_HOMES: dict[str, str] = {
    "PersonaeError": "personae.errors",
    "RunError": "personae.errors",
    "UsageError": "personae.errors",
    "Cast": "personae.persona",
    "ContextMode": "personae.persona",
    "Persona": "personae.persona",
    "Skill": "personae.persona",
    "Project": "personae.project",
    "Store": "personae.store",
    "Event": "personae.team.events",
    "EventKind": "personae.team.events",
    "Team": "personae.api.team",
    "CancelToken": "personae.api.team",
    "AnswerDelta": "personae.api.results",
    "Limits": "personae.api.results",
    "RunEnd": "personae.api.results",
    "RunResult": "personae.api.results",
    "SubtaskResult": "personae.api.results",
    "TeamResult": "personae.api.results",
    "Usage": "personae.api.results",
    "Context": "personae.api.context",
    "FittedMessages": "personae.api.context",
    "assemble": "personae.api.context",
    "fit_messages": "personae.api.context",
    "ChainOptions": "personae.api.handover",
    "HandoverRunOptions": "personae.api.handover",
    "HandoverSpec": "personae.api.handover",
    "create_handover": "personae.api.handover",
    "load_handover": "personae.api.handover",
    "run_chain": "personae.api.handover",
    "run_handover": "personae.api.handover",
    "Tool": "personae.tools.base",
    "AnswerTypeError": "personae.team.structured",
    "ModelCall": "personae.team.hooks",
    "ModelReply": "personae.team.hooks",
    "RunHooks": "personae.team.hooks",
    "ToolOutcome": "personae.team.hooks",
    "ToolUse": "personae.team.hooks",
    "Veto": "personae.team.hooks",
    "function_tool": "personae.tools.function",
    "replay_run": "personae.api.runs",
    "areplay_run": "personae.api.runs",
    "compare_runs": "personae.api.runs",
    "diff_calls": "personae.api.runs",
}


__getattr__ = lazy_front(__name__, _HOMES)
