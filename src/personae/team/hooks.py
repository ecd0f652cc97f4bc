"""Hooks around every model and tool call of a run, that may veto the call.

A :class:`RunHooks` object sees the run as it happens: ``before_model`` and
``after_model`` around each model request (every role, sub-agents included),
``before_tool`` and ``after_tool`` around each tool call (workers and
sub-agents), and ``on_event`` for every event of the run. Each call hook may
return a :class:`Veto` (plain or ``async``):

- a vetoed model request (before it is sent, or its answer after) stops the
  run as a usage cap does: no further request starts, what was validated is
  reported, the rest is listed as not done;
- a vetoed tool call does not run; the model is told it was refused, and a
  vetoed result is withheld from the model and from the run's context.

Every veto is recorded as a ``warning`` event with ``action: vetoed`` (and a
vetoed tool call as a failed ``tool_call`` event), so the stored run says who
refused what and why.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from personae.team.events import Event, RunWarning

__all__ = [
    "HookAnswer",
    "HookGate",
    "ModelCall",
    "ModelReply",
    "RunHooks",
    "ToolOutcome",
    "ToolUse",
    "Veto",
]


@dataclass(frozen=True)
class Veto:
    """A hook's refusal of a call, with the reason recorded in the run."""

    reason: str
    """Why the call is refused (shown to the user; for a tool call, to the model too)."""


HookAnswer = Veto | None | Awaitable[Veto | None]
"""What a call hook returns: ``None`` to let the call go on, a :class:`Veto` to refuse it
(directly or from a coroutine)."""


@dataclass(frozen=True, kw_only=True)
class ModelCall:
    """One model request about to be sent (``after_model`` gets the same object)."""

    id: str
    """Unique id of this request."""
    run_id: str
    """The run."""
    role: str
    """manager, worker, validator, subagent or summarizer."""
    persona: str | None
    """The persona the call runs as."""
    subtask: int | None
    """The subtask it works on (``None``: planning, synthesis)."""
    model: str
    """The model's label (``openai:gpt-4o``, ``scripted:...``)."""
    step: int
    """This request's number within its role call (from 1)."""
    messages: Sequence[Any] = ()
    """The pydantic-ai messages sent (``ModelRequest``/``ModelResponse``)."""


@dataclass(frozen=True, kw_only=True)
class ModelReply:
    """What the model answered to a :class:`ModelCall`."""

    text: str
    """The answer's text."""
    tool_calls: Sequence[tuple[str, Any]] = ()
    """The tools it asked for, with their arguments."""
    input_tokens: int = 0
    """Input tokens the model reported."""
    output_tokens: int = 0
    """Output tokens the model reported."""
    finish_reason: str | None = None
    """Why the answer ended (``stop``, ``tool_call``, ``length`` ...)."""


@dataclass(frozen=True, kw_only=True)
class ToolUse:
    """One tool call about to run (``after_tool`` gets the same object)."""

    id: str
    """The call's id (the model's tool call id)."""
    run_id: str
    """The run."""
    tool: str
    """The tool's name."""
    args: Mapping[str, Any]
    """The arguments the model gave."""
    persona: str
    """The persona calling it."""
    subtask: int | None
    """The subtask it works on."""
    depth: int | None = None
    """``None`` for the worker, else the sub-agent's depth."""


@dataclass(frozen=True, kw_only=True)
class ToolOutcome:
    """What a tool call returned."""

    ok: bool
    """It succeeded."""
    text: str
    """Its result (or error) as the model would see it."""


class RunHooks:
    """Hooks around a run's model and tool calls; override the ones you need.

    Each call hook may return a :class:`Veto` (or a coroutine giving one) to refuse the
    call; ``None`` lets it go on. Pass hooks as ``Team(hooks=[...])``. Example::

        class NoShell(RunHooks):
            def before_tool(self, call: ToolUse) -> Veto | None:
                return Veto("no shell in this run") if call.tool == "run_shell" else None
    """

    def on_event(self, event: Event) -> None:
        """Every event of the run, as it is emitted (the answer's text pieces included)."""

    def before_model(self, call: ModelCall) -> HookAnswer:
        """Before a model request is sent; a veto stops the run."""
        return None

    def after_model(self, call: ModelCall, reply: ModelReply) -> HookAnswer:
        """After the model answered; a veto discards the answer and stops the run."""
        return None

    def before_tool(self, call: ToolUse) -> HookAnswer:
        """Before a tool runs; a veto refuses the call (the model is told why)."""
        return None

    def after_tool(self, call: ToolUse, outcome: ToolOutcome) -> HookAnswer:
        """After a tool ran; a veto withholds its result from the model and the run."""
        return None


async def _answer(value: HookAnswer) -> Veto | None:
    result = await value if inspect.isawaitable(value) else value
    if result is not None and not isinstance(result, Veto):
        raise TypeError(f"a hook returned {type(result).__name__}; return a Veto or None")
    return result


@dataclass(kw_only=True)
class HookGate:
    """Asks a run's hooks about each call and records their vetoes as events."""

    hooks: Sequence[RunHooks] = ()
    """The hooks, asked in order (the first veto wins; later hooks are not asked)."""
    emit: Callable[[Event], Any] = field(default=lambda event: event)
    """Emits an event of the run (the runtime's bus)."""
    run_id: str = ""
    """The run (what the hooks are told)."""

    def __bool__(self) -> bool:
        return bool(self.hooks)

    async def _ask(self, method: str, *args: Any) -> Veto | None:
        for hook in self.hooks:
            veto = await _answer(getattr(hook, method)(*args))
            if veto is not None:
                return veto
        return None

    def _record(
        self, veto: Veto, what: Literal["model", "tool"], when: Literal["before", "after"],
        subtask: int | None, details: dict[str, Any],
    ) -> None:  # fmt: skip
        target = f"{details.get('role')} model call" if what == "model" else (
            f"tool call {details.get('tool')}"
        )  # fmt: skip
        self.emit(RunWarning(
            message=f"{target} vetoed by a hook ({when} the call): {veto.reason}",
            subtask=subtask, action="vetoed",
            details={"call": what, "when": when, "reason": veto.reason, **details},
        ))  # fmt: skip

    async def before_model(self, call: ModelCall) -> Veto | None:
        """Ask ``before_model``; a veto is recorded."""
        veto = await self._ask("before_model", call)
        if veto is not None:
            self._record(veto, "model", "before", call.subtask, _model_details(call))
        return veto

    async def after_model(self, call: ModelCall, reply: ModelReply) -> Veto | None:
        """Ask ``after_model``; a veto is recorded."""
        veto = await self._ask("after_model", call, reply)
        if veto is not None:
            self._record(veto, "model", "after", call.subtask, _model_details(call))
        return veto

    async def before_tool(self, call: ToolUse) -> Veto | None:
        """Ask ``before_tool``; a veto is recorded."""
        veto = await self._ask("before_tool", call)
        if veto is not None:
            self._record(veto, "tool", "before", call.subtask, _tool_details(call))
        return veto

    async def after_tool(self, call: ToolUse, outcome: ToolOutcome) -> Veto | None:
        """Ask ``after_tool``; a veto is recorded."""
        veto = await self._ask("after_tool", call, outcome)
        if veto is not None:
            self._record(veto, "tool", "after", call.subtask, _tool_details(call))
        return veto


def _model_details(call: ModelCall) -> dict[str, Any]:
    return {"call_id": call.id, "role": call.role, "persona": call.persona, "model": call.model}


def _tool_details(call: ToolUse) -> dict[str, Any]:
    return {"call_id": call.id, "tool": call.tool, "persona": call.persona}


def new_call_id() -> str:
    """A fresh id for a :class:`ModelCall`."""
    return uuid.uuid4().hex[:16]
