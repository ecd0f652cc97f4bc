"""A run's timeline as HTML: plan, subtasks, model calls with budget bars, tool calls,
validations with their completion signals, corrections, sub-agents as a tree, the answer.

Built from :func:`personae.telemetry.runtree.build_tree`; each event is rendered from
its typed class (:mod:`personae.team.events`, matched exhaustively). Unknown event
kinds render as a plain line with their payload as stored, so a newer store still shows.
"""

from __future__ import annotations

import json
from typing import Any, assert_never

from personae.context.report import read_stored_budget
from personae.store.runs import ModelCallRecord, StoredEvent
from personae.store.status import RunStatus
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
from personae.team.signals import CompletionSignal
from personae.telemetry.runtree import NodeKind, RunNode, typed
from personae.ui._html import badge, call_tokens, h, short, tokens, url
from personae.ui.budget import mini_bar

__all__ = ["agent_tree", "render_event", "render_item", "render_timeline", "signal_chips"]


def _details(summary: str, body: str, *, opened: bool = False) -> str:
    state = " open" if opened else ""
    return f"<details{state}><summary>{summary}</summary>{body}</details>"


def _pre(text: Any) -> str:
    return f"<pre>{h(text)}</pre>"


def _args(args: Any) -> str:
    if not isinstance(args, dict):
        return h(short(args, 80))
    return ", ".join(f"{h(k)}={h(short(repr(v), 60))}" for k, v in args.items())


def _call(call: ModelCallRecord, run_id: str) -> str:
    where = f"subtask {call.subtask}" if call.subtask else "turn"
    step = call.usage.get("step")
    step_text = f" · step {h(step)}" if isinstance(step, int) else ""
    return (
        f'<li class="item call" data-kind="model_call">'
        f'<a class="calllink" href="{url("runs", run_id, "calls", call.seq)}">'
        f"model call #{call.seq}</a> {badge(call.role, 'role')} "
        f'<span class="muted">{h(call.persona or "-")} · {h(where)}{step_text} · '
        f"{h(call_tokens(call.usage))}</span>{mini_bar(read_stored_budget(call.budget))}</li>"
    )


def _plan(event: PlanMade) -> str:
    rows = []
    for i, sub in enumerate(event.subtasks, start=1):
        reqs = "".join(f"<li>{h(r)}</li>" for r in sub.requirements)
        rows.append(
            f"<li><b>{i}.</b> {h(sub.description)}"
            + (f'<ul class="reqs">{reqs}</ul>' if reqs else "")
            + "</li>"
        )
    why = event.rationale
    note = f'<p class="muted">{h(why)}</p>' if why else ""
    return (
        f'<li class="item plan" data-kind="plan"><b>Plan</b>: {len(rows)} subtask(s)'
        f"<ol class='plan'>{''.join(rows)}</ol>{note}</li>"
    )


def _tool(event: ToolCalled, *, opened: bool = False) -> str:
    ok = bool(event.ok)
    state = badge("ok" if ok else "failed")
    if event.reused:
        state += " " + badge("reused", "plain")
    who = f'<span class="muted">[{h(event.persona)}]</span> ' if event.depth else ""
    head = f"tool {who}<code>{h(event.tool)}({_args(event.args)})</code> {state}"
    return (
        f'<li class="item tool{"" if ok else " failed"}" data-kind="tool_call">'
        f"{_details(head, _pre(event.result), opened=opened)}</li>"
    )


def _work(event: WorkDone) -> str:
    label = "Worker" if event.success else "Worker (did not finish)"
    answer = event.result or event.message
    return (
        f'<li class="item work" data-kind="work_result"><b>{label}</b>, attempt '
        f"{h(event.attempt)}: <span class='answer'>{h(answer)}</span></li>"
    )


def signal_chips(signal: CompletionSignal) -> str:
    """The completion signal of a validation as chips."""
    parts = []
    for key in ("confidence", "progress_made", "blocker_type", "suggested_strategy"):
        value = getattr(signal, key)
        if value is None:
            parts.append(f'<span class="chip">{h(key)}: -</span>')
            continue
        tone = "bad" if key == "blocker_type" else None
        parts.append(f'<span class="chip">{h(key)}: {badge(value, tone)}</span>')
    return f'<span class="signal">{"".join(parts)}</span>'


def _validation(event: Validated) -> str:
    how = "model check" if event.used_llm else "code check"
    verdict = badge("approved") if event.approved else badge("rejected")
    issues = "".join(f"<li>{h(i)}</li>" for i in event.issues or [])
    cls = "ok" if event.approved else "rejected"
    chips = signal_chips(event.completion_signal)
    return (
        f'<li class="item validation {cls}" data-kind="validation"><b>Validator</b> '
        f"({h(how)}, {h(event.involvement_level)}): {verdict} {chips}"
        + (f'<ul class="issues">{issues}</ul>' if issues else "")
        + "</li>"
    )


def _correction(event: Corrected) -> str:
    budget = f"{h(event.retries_used)}/{h(event.max_retries)}"
    return (
        f'<li class="item correction" data-kind="correction"><b>Correction</b> '
        f"{badge(event.action or 'retry', 'warn')} (retries {budget}, blocker "
        f"{badge(event.blocker, 'bad')}): {h(event.message)}</li>"
    )


def _warning(event: RunWarning) -> str:
    return f'<li class="item warning" data-kind="warning"><b>Warning</b>: {h(event.message)}</li>'


def _final(event: RunFinished) -> str:
    return (
        f'<li class="item final" data-kind="final"><b>Answer</b> {badge(event.status)}'
        f'<div class="answer final-text">{h(event.message)}</div>'
        f'<p class="muted">usage: {h(tokens(event.usage or {}))}</p></li>'
    )


def _start(event: RunStarted) -> str:
    src = event.context_from
    extra = f" · continues handover <code>{h(src)}</code>" if src else ""
    return f'<li class="item start muted" data-kind="start">{h(event.message)}{extra}</li>'


def _other(stored: StoredEvent) -> str:
    """A kind this viewer has no view for: its payload as stored (redacted), whatever its shape."""
    body = _pre(json.dumps(stored.data, indent=2, default=str))
    head = f"{badge(stored.kind, 'plain')} {h(stored.message)}"
    return f'<li class="item other" data-kind="{h(stored.kind)}">{_details(head, body)}</li>'


def _event(stored: StoredEvent, event: Event | None) -> str:
    """An event node: matched on its class (``None``: a kind this version does not know)."""
    match event:
        case RunStarted():
            return _start(event)
        case PlanMade():
            return _plan(event)
        case ToolCalled():
            return _tool(event)
        case WorkDone():
            return _work(event)
        case Validated():
            return _validation(event)
        case Corrected():
            return _correction(event)
        case RunWarning():
            return _warning(event)
        case RunFinished():
            return _final(event)
        case (
            SubtaskStarted() | SubagentStarted() | SubagentEnded() | AnswerStreamed()
            | CallProgress() | None
        ):  # fmt: skip
            return _other(stored)  # outside a tree position (or unknown): shown as stored
        case _:
            assert_never(event)


def _subagent(node: RunNode, run_id: str) -> str:
    begin = node.typed_event
    start = begin if isinstance(begin, SubagentStarted) else None
    mode, depth, task = (start.context_mode, start.depth, start.task) if start else ("?", "?", "?")
    end = node.typed_end
    state = badge(end.status) if end is not None else badge(RunStatus.RUNNING)
    usage = end.usage if end is not None else {}
    counts = (
        f"{h(usage.get('requests', 0))} requests, {h(usage.get('tool_calls', 0))} tool calls"
        if end is not None
        else ""
    )
    inner = "".join(render_item(child, run_id) for child in node.children)
    return (
        f'<li class="item subagent" data-kind="subagent"><div class="agenthead">'
        f"sub-agent <b>{h(node.persona)}</b> (context mode {h(mode)}, "
        f"depth {h(depth)}) {state} <span class='muted'>{counts}</span>"
        f'<div class="muted">task: {h(task)}</div></div>'
        f'<ul class="tree">{inner}</ul></li>'
    )


def _subtask(node: RunNode, run_id: str) -> str:
    begin = node.typed_event
    persona = begin.persona if isinstance(begin, SubtaskStarted) else None
    title = node.event.message if node.event is not None else ""
    inner = "".join(render_item(child, run_id) for child in node.children)
    return (
        f'<li class="subtask" data-kind="subtask"><h3>Subtask {h(node.subtask)}: {h(title)} '
        f'<span class="muted">(persona {h(persona)})</span></h3><ul class="items">{inner}</ul></li>'
    )


def render_item(node: RunNode, run_id: str) -> str:
    """One node (and what is inside it) as an ``<li>``."""
    match node.kind:
        case NodeKind.MODEL_CALL:
            return _call(node.call, run_id) if node.call is not None else ""
        case NodeKind.SUBAGENT:
            return _subagent(node, run_id)
        case NodeKind.SUBTASK:
            return _subtask(node, run_id)
        case NodeKind.EVENT:
            return _event(node.event, node.typed_event) if node.event is not None else ""
        case NodeKind.RUN:
            return "".join(render_item(child, run_id) for child in node.children)
        case _:
            assert_never(node.kind)


def render_event(event: StoredEvent, run_id: str) -> str:
    """One event on its own (no tree): sub-agent starts and ends as one line each."""
    match typed(event):
        case SubagentStarted() as begin:
            who = begin.persona
            text = f"starts (context mode {h(begin.context_mode)}): {h(begin.task)}"
        case SubagentEnded() as end:
            who = end.persona
            text = f"finished {badge(end.status)}"
        case SubtaskStarted():
            return (
                f'<li class="item muted" data-kind="subtask_start">next: subtask '
                f"{h(event.subtask)} starts: {h(event.message)}</li>"
            )
        case ToolCalled() as call:
            return _tool(call, opened=True)  # on a call's page, what came back is the point
        case other:
            return _event(event, other)
    return f'<li class="item subagent" data-kind="subagent">sub-agent <b>{h(who)}</b> {text}</li>'


def agent_tree(root: RunNode, persona: str | None) -> str:
    """Who ran: the run's persona, and every sub-agent under the subtask that spawned it."""

    def nested(node: RunNode) -> str:
        items = []
        for child in node.children:
            if child.kind is NodeKind.SUBAGENT:
                ended = child.typed_end
                end = ended.status if ended is not None else RunStatus.RUNNING
                where = f"subtask {child.subtask}" if child.subtask else "turn"
                items.append(
                    f"<li>{h(child.persona)} {badge(end)} <span class='muted'>"
                    f"({h(where)})</span>{nested(child)}</li>"
                )
            elif child.kind is NodeKind.SUBTASK:
                items.append(nested(child))
        inner = "".join(items)
        return f"<ul>{inner}</ul>" if inner and node.kind is not NodeKind.SUBTASK else inner

    top = f"<li>{h(persona or '-')}{nested(root)}</li>"
    return f'<div class="agents"><b>Agents</b><ul>{top}</ul></div>'


def render_timeline(root: RunNode, run_id: str) -> str:
    """The whole timeline (an ordered list of items)."""
    items = "".join(render_item(child, run_id) for child in root.children)
    return f'<ol class="timeline items">{items}</ol>'
