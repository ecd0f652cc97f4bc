"""The Manager: plans (structured output), decomposes, and synthesizes.

Synthesis keeps validated work separate from the rest: the model writes the
answer from validated work only, and the list of work that failed, was
skipped or was not validated is written by code, so the answer never claims
it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, assert_never

from pydantic import BaseModel

from personae.persona.model import Persona
from personae.team.events import AnswerStreamed, RunWarning
from personae.team.plan_request import manager_instructions, plan_instructions, task_part
from personae.team.runtime import CallInfo, CallOptions, Runtime
from personae.team.signals import Plan, Subtask, SubtaskStatus
from personae.team.structured import (
    AnswerType,
    AnswerTypeError,
    StructuredOutputError,
    ask_structured,
)
from personae.team.turn_context import ContextView, TurnContext

__all__ = [
    "SubtaskOutcome",
    "decompose",
    "fallback_plan",
    "make_plan",
    "plan_instructions",
    "synthesize",
]


@dataclass(frozen=True, kw_only=True)
class SubtaskOutcome:
    """How one planned subtask ended."""

    number: int
    """Subtask number (from 1)."""
    subtask: Subtask
    """The original subtask."""
    status: SubtaskStatus
    """validated; partial (retry budget used up with progress: its work goes to the
    synthesis marked partial); unvalidated (validator unavailable); skipped; escalated."""
    result: str
    """The accepted (or last) worker result."""
    reason: str = ""
    """Why it was not validated."""
    attempts: int = 1
    """Worker attempts made."""


async def make_plan(runtime: Runtime, turn: TurnContext, persona: Persona | None) -> Plan:
    """Break the turn's task into subtasks (each with description and requirements)."""
    view = turn.view("manager")
    instructions = plan_instructions(persona)
    return await _ask_for_plan(
        runtime, view, persona, instructions, [task_part(view.text, turn.task)], subtask=None
    )


async def decompose(
    runtime: Runtime,
    turn: TurnContext,
    persona: Persona | None,
    *,
    subtask: Subtask,
    number: int,
    missing: str,
) -> Plan:
    """Split a subtask that was only partly done into smaller steps."""
    view = turn.view("manager")
    instructions = manager_instructions(
        persona,
        "A subtask was only partly done. Split what remains into smaller steps, each with a "
        "description and requirements.",
    )
    parts = [
        f"<subtask>\n{subtask.description}\n</subtask>",
        f"<missing>\n{missing}\n</missing>",
    ]
    return await _ask_for_plan(runtime, view, persona, instructions, parts, subtask=number)


def _call_info(
    view: ContextView, persona: Persona | None, instructions: str, prompt: str, subtask: int | None
) -> CallInfo:
    """How a Manager call is recorded: its persona, subtask, full text and budget report."""
    return CallInfo(
        role="manager",
        persona=persona.name if persona else None,
        subtask=subtask,
        context_text=f"{instructions}\n\n{prompt}",
        budget=view.report,
    )


async def _ask_for_plan(
    runtime: Runtime,
    view: ContextView,
    persona: Persona | None,
    instructions: str,
    parts: list[str],
    *,
    subtask: int | None,
) -> Plan:
    """One structured Manager call: the role's context view, then ``parts``."""
    prompt = "\n\n".join(p for p in (view.text, *parts) if p)
    info = _call_info(view, persona, instructions, prompt, subtask)
    return await ask_structured(
        runtime, info, instructions=instructions, prompt=prompt, output_type=Plan
    )


def fallback_plan(runtime: Runtime, what: Subtask, reason: str, *, number: int | None) -> Plan:
    """The plan when the Manager's answer did not parse: ``what`` as the one subtask, with
    a ``plan_unparsed`` warning (the run goes on; it never fails for a plan)."""
    runtime.emit(
        RunWarning(
            message=f"the plan did not parse; the task runs as one subtask: {reason}",
            subtask=number,
            action="plan_unparsed",
            details={"error": reason},
        )
    )
    return Plan(subtasks=[what], rationale="the Manager's plan did not parse")


def not_done_section(outcomes: list[SubtaskOutcome]) -> str:
    """The code-written list of subtasks whose work is not validated."""
    lines = []
    for o in outcomes:
        match o.status:
            case SubtaskStatus.VALIDATED:
                continue
            case SubtaskStatus.PARTIAL:
                label = "partial, not validated"
            case SubtaskStatus.UNVALIDATED:
                label = "not validated"
            case SubtaskStatus.SKIPPED:
                label = "skipped"
            case SubtaskStatus.ESCALATED:
                label = "needs you"
            case _:
                assert_never(o.status)
        lines.append(f"- [{label}] {o.subtask.description}" + (f": {o.reason}" if o.reason else ""))
    return "\n".join(lines)


async def synthesize(
    runtime: Runtime,
    turn: TurnContext,
    persona: Persona | None,
    outcomes: list[SubtaskOutcome],
    *,
    answer: AnswerType | None = None,
) -> tuple[str, Any]:
    """The final answer: the model's summary of validated work (and of partial work, marked
    partial) + a code-written 'not done' list, and, when the caller asked for an ``answer``
    type, the summary as that type (``None`` when no model wrote one).

    Raises :class:`AnswerTypeError` when the model's answer does not parse as the type."""
    validated = [o for o in outcomes if o.status is SubtaskStatus.VALIDATED]
    partial = [o for o in outcomes if o.status is SubtaskStatus.PARTIAL and o.result.strip()]
    not_done = not_done_section(outcomes)
    summary = ""
    if (validated or partial) and runtime.stopped:
        # No model call left: report the results themselves.
        summary = (
            "The run's usage cap or deadline was reached; results:\n"
            + "\n".join(f"- {o.subtask.description}: {o.result}" for o in validated)
            + "".join(f"\n- [partial] {o.subtask.description}: {o.result}" for o in partial)
        )
    elif validated or partial:
        view = turn.view("manager")
        instructions = manager_instructions(
            persona,
            "Write the final answer for the user from the VALIDATED work below. PARTIAL work "
            "may be used only if you say it is partial and not validated. Do not mention or "
            "claim anything else as done.",
        )
        work = "\n\n".join(
            f"<validated_work subtask='{o.number}'>\n{o.subtask.description}\n---\n{o.result}\n"
            "</validated_work>"
            for o in validated
        )
        work += "".join(
            f"\n\n<partial_work subtask='{o.number}' status='partial, not validated'>\n"
            f"{o.subtask.description}\n---\n{o.result}\n</partial_work>"
            for o in partial
        )
        task = task_part(view.text, turn.task)
        prompt = "\n\n".join(p for p in (view.text, task, work) if p)
        info = _call_info(view, persona, instructions, prompt, None)
        if answer is not None:
            typed = await _typed_answer(runtime, info, instructions, prompt, answer)
            summary = typed.model_dump_json(indent=2)
            if not_done:
                summary += "\n\nNot completed:\n" + not_done
            return summary, answer.unwrap(typed)
        output, _ = await runtime.call(
            info,
            instructions=instructions,
            prompt=prompt,
            options=CallOptions(on_text=lambda piece: runtime.emit(AnswerStreamed(text=piece))),
        )
        summary = str(output).strip()
    else:
        summary = "No part of the task could be validated."
    if not_done:
        summary += "\n\nNot completed:\n" + not_done
    return summary, None


async def _typed_answer(
    runtime: Runtime, info: CallInfo, instructions: str, prompt: str, answer: AnswerType
) -> BaseModel:
    """The final answer as ``answer``'s model (asked again when it does not parse)."""
    asked = f"{instructions}\n\nGive the final answer as one {answer.name} object."
    try:
        return await ask_structured(
            runtime, info, instructions=asked, prompt=prompt, output_type=answer.model,
            attempts=2,
        )  # fmt: skip
    except StructuredOutputError as exc:
        raise AnswerTypeError(
            f"the final answer did not parse as {answer.name}: {exc.message}",
            run_id=runtime.run_id, output_type=answer.name,
        ) from exc  # fmt: skip
