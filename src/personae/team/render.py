"""Readable lines for run events (used by the CLI's live view and ``runs show``).

Pure text with a style name per line; the CLI decides how to print them.
With ``explain=True`` (the demo) the first event of each kind gets a short
note for newcomers.
"""

from __future__ import annotations

from typing import Any

from personae.team.events import Event, EventKind

__all__ = ["EXPLANATIONS", "EventLines", "describe"]

EXPLANATIONS: dict[str, str] = {
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
    if kind is EventKind.PLAN:
        lines.append(("title", f"Plan: {len(d.get('subtasks', []))} subtask(s)"))
        for i, sub in enumerate(d.get("subtasks", []), start=1):
            reqs = "; ".join(sub.get("requirements") or [])
            lines.append(("plain", f"  {i}. {sub.get('description')}" + (f"  [{reqs}]" * bool(reqs))))
    elif kind is EventKind.SUBTASK_START:
        lines.append(("title", f"Subtask {event.subtask}: {event.message}  (persona: {d.get('persona')})"))
    elif kind is EventKind.TOOL_CALL:
        who = f"[{d.get('persona')}] " if d.get("depth") else ""
        indent = "      " if d.get("depth") else "  "
        status = "ok" if d.get("ok") else "FAILED"
        style = "tool" if d.get("ok") else "bad"
        lines.append((style, f"{indent}tool {who}{d.get('tool')}({_args(d.get('args', {}))}) -> {status}"))
        if not d.get("ok"):
            lines.append(("bad", f"{indent}  {_short(d.get('result'))}"))
    elif kind is EventKind.WORK_RESULT:
        label = "Worker" if d.get("success") else "Worker (did not finish)"
        lines.append(("plain", f"  {label}, attempt {d.get('attempt')}: {_short(d.get('result'))}"))
    elif kind is EventKind.VALIDATION:
        signal = d.get("completion_signal") or {}
        how = "model check" if d.get("used_llm") else "code check"
        level = d.get("involvement_level")
        if d.get("approved"):
            lines.append(("good", f"  Validator ({how}, {level}): approved, confidence {signal.get('confidence')}"))
        else:
            lines.append(("bad", f"  Validator ({how}, {level}): REJECTED: {_short('; '.join(d.get('issues', [])))}"))
            lines.append(("plain", f"    blocker={signal.get('blocker_type')} progress={signal.get('progress_made')} "
                                   f"confidence={signal.get('confidence')}"))
    elif kind is EventKind.CORRECTION:
        lines.append(("warn", f"  Correction ({d.get('retries_used')}/{d.get('max_retries')}): {_short(event.message, 220)}"))
    elif kind is EventKind.SUBAGENT:
        if d.get("phase") == "start":
            lines.append(("tool", f"    sub-agent {d.get('persona')} starts (context mode: {d.get('context_mode')}, depth {d.get('depth')})"))
        else:
            usage = d.get("usage") or {}
            lines.append(("tool", f"    sub-agent {d.get('persona')} finished: {d.get('status')} "
                                  f"({usage.get('requests', 0)} requests, {usage.get('tool_calls', 0)} tool calls)"))
    elif kind is EventKind.WARNING:
        lines.append(("warn", f"  Warning: {event.message}"))
    elif kind is EventKind.FINAL:
        usage = d.get("usage") or {}
        lines.append(("title", f"Answer ({d.get('status')}):"))
        lines.extend(("answer", f"  {line}") for line in event.message.splitlines())
        lines.append(("note", f"  usage: {usage.get('requests', 0)} model requests, "
                              f"{usage.get('input_tokens', 0)} input + {usage.get('output_tokens', 0)} output tokens, "
                              f"{usage.get('tool_calls', 0)} tool calls"))  # fmt: skip
    return lines
