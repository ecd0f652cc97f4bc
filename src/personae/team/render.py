"""Readable lines for run events (used by the CLI's live view and ``runs show``).

Pure text with a style name per line; the CLI decides how to print them.
With ``explain=True`` (the demo) the first event of each kind gets a short
note for newcomers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from personae.team.events import Event, EventKind

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
    d = event.data
    kind = event.kind
    lines: EventLines = []
    if explain and seen is not None and kind.value not in seen:
        seen.add(kind.value)
        lines.append(("note", f"  ({EXPLANATIONS[kind.value]})"))
    handler = _HANDLERS.get(kind)
    if handler is not None:
        lines.extend(handler(event, d))
    return lines


def _start(event: Event, d: dict[str, Any]) -> EventLines:
    return [("note", event.message)]


def _plan(event: Event, d: dict[str, Any]) -> EventLines:
    subs = d.get("subtasks", [])
    lines: EventLines = [("title", f"Plan: {len(subs)} subtask(s)")]
    for i, sub in enumerate(subs, start=1):
        reqs = "; ".join(sub.get("requirements") or [])
        tail = f"  [{reqs}]" if reqs else ""
        lines.append(("plain", f"  {i}. {sub.get('description')}{tail}"))
    return lines


def _subtask(event: Event, d: dict[str, Any]) -> EventLines:
    head = f"Subtask {event.subtask}: {event.message}"
    return [("title", f"{head}  (persona: {d.get('persona')})")]


def _tool(event: Event, d: dict[str, Any]) -> EventLines:
    nested = bool(d.get("depth"))
    who = f"[{d.get('persona')}] " if nested else ""
    indent = "      " if nested else "  "
    ok = bool(d.get("ok"))
    call = f"{d.get('tool')}({_args(d.get('args', {}))})"
    status = ("ok (reused earlier result)" if d.get("reused") else "ok") if ok else "FAILED"
    lines: EventLines = [("tool" if ok else "bad", f"{indent}tool {who}{call} -> {status}")]
    if not ok:
        lines.append(("bad", f"{indent}  {_short(d.get('result'))}"))
    return lines


def _work(event: Event, d: dict[str, Any]) -> EventLines:
    label = "Worker" if d.get("success") else "Worker (did not finish)"
    return [("plain", f"  {label}, attempt {d.get('attempt')}: {_short(d.get('result'))}")]


def _validation(event: Event, d: dict[str, Any]) -> EventLines:
    signal = d.get("completion_signal") or {}
    how = "model check" if d.get("used_llm") else "code check"
    head = f"  Validator ({how}, {d.get('involvement_level')})"
    if d.get("approved"):
        return [("good", f"{head}: approved, confidence {signal.get('confidence')}")]
    issues = _short("; ".join(d.get("issues", [])))
    detail = (
        f"    blocker={signal.get('blocker_type')} progress={signal.get('progress_made')} "
        f"confidence={signal.get('confidence')}"
    )
    return [("bad", f"{head}: REJECTED: {issues}"), ("plain", detail)]


def _correction(event: Event, d: dict[str, Any]) -> EventLines:
    budget = f"{d.get('retries_used')}/{d.get('max_retries')}"
    return [("warn", f"  Correction ({budget}): {_short(event.message, 220)}")]


def _subagent(event: Event, d: dict[str, Any]) -> EventLines:
    name = d.get("persona")
    if d.get("phase") == "start":
        mode = f"context mode: {d.get('context_mode')}, depth {d.get('depth')}"
        return [("tool", f"    sub-agent {name} starts ({mode})")]
    usage = d.get("usage") or {}
    counts = f"{usage.get('requests', 0)} requests, {usage.get('tool_calls', 0)} tool calls"
    return [("tool", f"    sub-agent {name} finished: {d.get('status')} ({counts})")]


def _warning(event: Event, d: dict[str, Any]) -> EventLines:
    return [("warn", f"  Warning: {event.message}")]


def _final(event: Event, d: dict[str, Any]) -> EventLines:
    usage = d.get("usage") or {}
    lines: EventLines = [("title", f"Answer ({d.get('status')}):")]
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


_HANDLERS: dict[EventKind, Callable[[Event, dict[str, Any]], EventLines]] = {
    EventKind.START: _start,
    EventKind.PLAN: _plan,
    EventKind.SUBTASK_START: _subtask,
    EventKind.TOOL_CALL: _tool,
    EventKind.WORK_RESULT: _work,
    EventKind.VALIDATION: _validation,
    EventKind.CORRECTION: _correction,
    EventKind.SUBAGENT: _subagent,
    EventKind.WARNING: _warning,
    EventKind.FINAL: _final,
}
