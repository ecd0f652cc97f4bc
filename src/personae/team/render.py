"""Readable lines for run events (used by the CLI's live view and ``runs show``).

Pure text with a style name per line; the CLI decides how to print them.
With ``explain=True`` (the demo) the first event of each kind gets a short
note for newcomers.
"""

from __future__ import annotations

from typing import Any, assert_never

from personae.team.events import (
    AnswerStreamed,
    CallProgress,
    Corrected,
    Event,
    PlanMade,
    RunFinished,
    RunStarted,
    RunWarning,
    SubagentEnded,
    SubagentStarted,
    SubtaskStarted,
    ToolCalled,
    Validated,
    WorkDone,
)

__all__ = ["EXPLANATIONS", "EventLines", "describe"]

EXPLANATIONS: dict[str, str] = {
    "start": "Every run gets an id; its events and model calls are stored under it.",
    "plan": "The Manager broke the task into subtasks (a structured output: description + "
    "requirements for each).",
    "subtask_start": "Each subtask goes to a Worker running as the active persona, with only "
    "that persona's tools.",
    "tool_call": "Tool calls run through the persona's narrow tool subset; the result is "
    "shared with later subtasks.",
    "work_result": "The Worker's answer goes to the Validator before anything is accepted.",
    "validation": "The Validator runs code checks first (failed tools, loops, no tool use, "
    "required tools, claimed files), then at most one structured model call.",
    "correction": "Not approved: dispatch picks a strategy from the blocker type (here: retry "
    "naming the tools to use), within a per-subtask retry budget.",
    "subagent": "The agent tool starts a sub-agent with its own persona prompt only, its own "
    "tool subset and step budget; only its final message comes back.",
    "call": "A model call starts, streams or ends: each request carries its output cap "
    "(max_tokens) and each role's call a timeout; the live view shows the call in progress "
    "with the tokens streamed so far.",
    "answer_delta": "The Manager's final answer arrives piece by piece as the model writes "
    "it; the final event carries it whole.",
    "warning": "Warnings are things you should know: skipped or escalated subtasks, an "
    "unavailable validator.",
    "final": "The Manager writes the answer from validated work only; anything not "
    "validated is listed separately by code.",
}
"""One line per event kind for newcomers."""

EventLines = list[tuple[str, str]]


def _short(value: Any, limit: int = 160) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{k}={_short(repr(v), 60)}" for k, v in args.items())


def describe(event: Event, *, explain: bool = False, seen: set[str] | None = None) -> EventLines:
    """Lines ``(style, text)`` for one event."""
    kind = event.kind
    lines: EventLines = []
    if explain and seen is not None and kind.value not in seen:
        seen.add(kind.value)
        lines.append(("note", f"  ({EXPLANATIONS[kind.value]})"))
    match event:
        case RunStarted():
            lines.append(("note", event.message))
        case PlanMade():
            lines.extend(_plan(event))
        case SubtaskStarted():
            head = f"Subtask {event.subtask}: {event.message}"
            lines.append(("title", f"{head}  (persona: {event.persona})"))
        case ToolCalled():
            lines.extend(_tool(event))
        case WorkDone():
            label = "Worker" if event.success else "Worker (did not finish)"
            lines.append(("plain", f"  {label}, attempt {event.attempt}: {_short(event.result)}"))
        case Validated():
            lines.extend(_validation(event))
        case Corrected():
            budget = f"{event.retries_used}/{event.max_retries}"
            lines.append(("warn", f"  Correction ({budget}): {_short(event.message, 220)}"))
        case RunWarning():
            lines.append(("warn", f"  Warning: {event.message}"))
        case SubagentStarted():
            mode = f"context mode: {event.context_mode}, depth {event.depth}"
            lines.append(("tool", f"    sub-agent {event.persona} starts ({mode})"))
        case SubagentEnded():
            usage = event.usage or {}
            counts = f"{usage.get('requests', 0)} requests, {usage.get('tool_calls', 0)} tool calls"
            ended = f"sub-agent {event.persona} finished: {event.status} ({counts})"
            lines.append(("tool", f"    {ended}"))
        case RunFinished():
            lines.extend(_final(event))
        case AnswerStreamed() | CallProgress():
            pass  # the final event carries the whole answer; the stored call, the call
        case _:
            assert_never(event)
    return lines


def _plan(event: PlanMade) -> EventLines:
    subs = event.subtasks
    lines: EventLines = [("title", f"Plan: {len(subs)} subtask(s)")]
    for i, sub in enumerate(subs, start=1):
        reqs = "; ".join(sub.requirements)
        tail = f"  [{reqs}]" if reqs else ""
        lines.append(("plain", f"  {i}. {sub.description}{tail}"))
    return lines


def _tool(event: ToolCalled) -> EventLines:
    nested = bool(event.depth)
    who = f"[{event.persona}] " if nested else ""
    indent = "      " if nested else "  "
    ok = bool(event.ok)
    call = f"{event.tool}({_args(event.args or {})})"
    status = ("ok (reused earlier result)" if event.reused else "ok") if ok else "FAILED"
    lines: EventLines = [("tool" if ok else "bad", f"{indent}tool {who}{call} -> {status}")]
    if not ok:
        lines.append(("bad", f"{indent}  {_short(event.result)}"))
    return lines


def _validation(event: Validated) -> EventLines:
    signal = event.completion_signal
    how = "model check" if event.used_llm else "code check"
    head = f"  Validator ({how}, {event.involvement_level})"
    if event.approved:
        return [("good", f"{head}: approved, confidence {signal.confidence}")]
    issues = _short("; ".join(event.issues))
    detail = (
        f"    blocker={signal.blocker_type} progress={signal.progress_made} "
        f"confidence={signal.confidence}"
    )
    return [("bad", f"{head}: REJECTED: {issues}"), ("plain", detail)]


def _final(event: RunFinished) -> EventLines:
    usage = event.usage
    lines: EventLines
    if event.error is not None:  # failed or cancelled: no answer, the reason
        lines = [("title", f"Run {event.status}: {event.error}")]
    else:
        lines = [("title", f"Answer ({event.status}):")]
        lines.extend(("answer", f"  {line}") for line in event.message.splitlines())
    tokens = f"{usage.get('input_tokens', 0)} input + {usage.get('output_tokens', 0)} output"
    lines.append(
        (
            "note",
            f"  usage: {usage.get('requests', 0)} model requests, {tokens} tokens, "
            f"{usage.get('tool_calls', 0)} tool calls",
        )
    )
    return lines
