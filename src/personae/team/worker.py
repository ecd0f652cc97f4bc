"""The Worker: executes one subtask with its persona's tools, within its step budget."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.exceptions import UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.messages import ModelMessage
from pydantic_ai.toolsets import AbstractToolset

from personae.models.roles import ROLE_MARKER
from personae.persona.model import Persona
from personae.team.events import RunWarning
from personae.team.loopdetect import LoopDetector
from personae.team.recording import RecordingToolset, tool_call_emitter
from personae.team.runtime import CallInfo, CallOptions, Runtime
from personae.team.signals import Subtask, WorkerResult
from personae.team.turn_context import TurnContext
from personae.tools.records import CallLog

__all__ = ["DEFAULT_MAX_STEPS", "WorkerTools", "run_worker", "worker_prompt"]

DEFAULT_MAX_STEPS = 12
"""Step budget when a persona sets none."""


def worker_instructions(
    persona: Persona, available_agents: str = "", *, with_prompt: bool = True
) -> str:
    """The worker's system instructions: role marker, the persona's prompt (unless
    ``with_prompt`` is false: the context's ``<active_persona>`` carries it), and the
    ``<available_agents>`` listing when it may delegate."""
    head = (
        f"{ROLE_MARKER.format(role='worker')}\n"
        "You are the Worker of a personae team. Do exactly the subtask given, using your "
        "tools; report only what the tools' output supports. Do not repeat a tool call "
        "whose result is already in the context."
    )
    parts = [head]
    if with_prompt and persona.system_prompt.strip():
        parts.append(persona.system_prompt.strip())
    if available_agents.strip():
        parts.append(
            "You may delegate a self-contained task with the agent tool (name, task); each "
            "agent's <context> says what the sub-agent receives besides the task.\n"
            + available_agents.strip()
        )
    return "\n\n".join(parts)


def worker_prompt(
    context_text: str, subtask: Subtask, correction: str | None, skills_text: str = ""
) -> str:
    """The worker's prompt: shared context, skill bodies the task calls for, the subtask,
    its requirements, any correction."""
    parts = [context_text] if context_text else []
    if skills_text:
        parts.append(skills_text)
    parts.append(f"<subtask>\n{subtask.description}\n</subtask>")
    if subtask.requirements:
        reqs = "\n".join(f"- {r}" for r in subtask.requirements)
        parts.append(f"<requirements>\n{reqs}\n</requirements>")
    if correction:
        parts.append(f"<correction>\n{correction}\n</correction>")
    return "\n\n".join(parts)


@dataclass(frozen=True, kw_only=True)
class WorkerTools:
    """The tools a worker may call and what watches their calls."""

    toolset: AbstractToolset[Any]
    """The narrowed toolset (recorded and checked against ``allowed``)."""
    allowed: frozenset[str]
    """Tool names the persona may call."""
    detector: LoopDetector
    """Spots the same call made over and over."""
    extra: Sequence[AbstractToolset[Any]] = ()
    """Further toolsets, not recorded."""


async def run_worker(
    runtime: Runtime,
    turn: TurnContext,
    *,
    subtask: Subtask,
    number: int,
    persona: Persona,
    tools: WorkerTools,
    correction: str | None = None,
    skills_text: str = "",
) -> WorkerResult:
    """Run the worker once on ``subtask`` with ``tools``; tool calls are recorded and
    shared with the turn.

    ``skills_text`` is the ``<skills>`` block of L2 bodies the task calls for.
    """
    allowed = tools.allowed
    view = turn.view("worker")
    agents = turn.available_agents if "agent" in allowed else ""
    # The persona prompt once: in the context's <active_persona> section when the
    # worker's profile has one (whole), else in the instructions.
    has_block = any(s.tag == "active_persona" and s.rule == "full" for s in view.report.sections)
    instructions = worker_instructions(persona, agents, with_prompt=not has_block)
    prompt = worker_prompt(view.text, subtask, correction, skills_text)

    log = CallLog()
    wrapped = RecordingToolset(
        wrapped=tools.toolset,
        allowed=allowed,
        persona=persona.name,
        log=log,
        detector=tools.detector,
        on_call=tool_call_emitter(runtime, subtask=number, persona=persona.name, turn=turn),
        memo=turn.tool_memo,
        gate=runtime.hooks,
        subtask=number,
    )
    info = CallInfo(
        role="worker",
        persona=persona.name,
        subtask=number,
        context_text=f"{instructions}\n\n{prompt}",
        budget=view.report,
    )
    steps = persona.max_steps or DEFAULT_MAX_STEPS
    requests_before = runtime.usage.requests
    error: str | None = None
    misbehaved: str | None = None
    text = ""
    messages: list[ModelMessage] = []
    try:
        output, _ = await runtime.call(
            info,
            instructions=instructions,
            prompt=prompt,
            options=CallOptions(
                persona_model=persona.model,
                toolsets=[wrapped, *tools.extra],
                max_steps=steps,
            ),
            messages_out=messages,
        )
        text = str(output)
    except UsageLimitExceeded as exc:
        if runtime.stopped:
            raise  # the whole run's cap or deadline, not this worker's step budget
        error = f"step budget of {steps} used up: {exc}"
    except UnexpectedModelBehavior as exc:
        misbehaved = error = f"model misbehaved: {exc.message}"
    except TimeoutError as exc:  # this call's timeout (the run's deadline raised above)
        misbehaved = error = str(exc)
    finally:
        wrapped.record_refused(messages)
    if misbehaved is not None:
        error = _warn_stopped(
            runtime, log, number=number, persona=persona, allowed=allowed, error=misbehaved
        )
    return _result(log, text, error, runtime.usage.requests - requests_before)


def _warn_stopped(
    runtime: Runtime,
    log: CallLog,
    *,
    number: int,
    persona: Persona,
    allowed: frozenset[str],
    error: str,
) -> str:
    """Emit a user-visible event saying why the worker stopped; returns that reason."""
    refused = sorted({c.tool for c in log.calls if c.tool not in allowed})
    if refused:
        names = ", ".join(repr(t) for t in refused)
        message = (
            f"worker for subtask {number} stopped: the model kept calling {names}, which "
            f"persona {persona.name} may not use (allowed: {', '.join(sorted(allowed)) or 'none'})"
        )
    else:
        message = f"worker for subtask {number} stopped: {error}"
    runtime.emit(
        RunWarning(
            message=message,
            subtask=number,
            action="worker_stopped",
            details={"refused_tools": refused, "error": error},
        )
    )
    return message


def _result(log: CallLog, text: str, error: str | None, requests: int) -> WorkerResult:
    return WorkerResult(
        success=error is None,
        result=text or (error or ""),
        tools_used=log.tools_used,
        tool_calls=list(log.calls),
        failed_tools=log.failed,
        error=error,
        loop_detected=log.loop_detected,
        usage={"requests": requests},
    )
