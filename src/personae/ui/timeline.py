"""A run's timeline as HTML: plan, subtasks, model calls with budget bars, tool calls,
validations with their completion signals, corrections, sub-agents as a tree, the answer.

Built from :func:`personae.telemetry.runtree.build_tree`. Unknown event kinds
render as a plain line with their payload, so a newer store still shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from personae.store.runs import StoredEvent
from personae.team.events import SubagentEnded, SubagentStarted, SubtaskStarted, ToolCalled
from personae.telemetry.runtree import RunNode, typed
from personae.ui._html import badge, h, short, tokens, url
from personae.ui.budget import mini_bar

__all__ = ["agent_tree", "render_event", "render_item", "render_timeline", "signal_chips"]


def _message(node: RunNode) -> str:
    """The message of the node's event ("" for a node without one)."""
    return node.event.message if node.event else ""


def _details(summary: str, body: str, *, opened: bool = False) -> str:
    state = " open" if opened else ""
    return f"<details{state}><summary>{summary}</summary>{body}</details>"


def _pre(text: Any) -> str:
    return f"<pre>{h(text)}</pre>"


def _args(args: Any) -> str:
    if not isinstance(args, dict):
        return h(short(args, 80))
    return ", ".join(f"{h(k)}={h(short(repr(v), 60))}" for k, v in args.items())


def _call(node: RunNode, run_id: str) -> str:
    call = node.call
    assert call is not None
    where = f"subtask {call.subtask}" if call.subtask else "turn"
    step = call.usage.get("step")
    step_text = f" · step {h(step)}" if isinstance(step, int) else ""
    return (
        f'<li class="item call" data-kind="model_call">'
        f'<a class="calllink" href="{url("runs", run_id, "calls", call.seq)}">'
        f"model call #{call.seq}</a> {badge(call.role, 'role')} "
        f'<span class="muted">{h(call.persona or "-")} · {h(where)}{step_text} · '
        f"{h(tokens(call.usage))}</span>{mini_bar(call.budget)}</li>"
    )


def _plan(node: RunNode) -> str:
    subs = node.data.get("subtasks") or []
    rows = []
    for i, item in enumerate(subs if isinstance(subs, list) else [], start=1):
        sub = item if isinstance(item, dict) else {"description": item}
        reqs = "".join(f"<li>{h(r)}</li>" for r in sub.get("requirements") or [])
        rows.append(
            f"<li><b>{i}.</b> {h(sub.get('description'))}"
            + (f'<ul class="reqs">{reqs}</ul>' if reqs else "")
            + "</li>"
        )
    why = node.data.get("rationale")
    note = f'<p class="muted">{h(why)}</p>' if why else ""
    return (
        f'<li class="item plan" data-kind="plan"><b>Plan</b>: {len(rows)} subtask(s)'
        f"<ol class='plan'>{''.join(rows)}</ol>{note}</li>"
    )


def _tool(node: RunNode, *, opened: bool = False) -> str:
    d = node.data
    ok = bool(d.get("ok"))
    state = badge("ok" if ok else "failed")
    if d.get("reused"):
        state += " " + badge("reused", "plain")
    who = f'<span class="muted">[{h(node.persona)}]</span> ' if d.get("depth") else ""
    head = f"tool {who}<code>{h(d.get('tool'))}({_args(d.get('args', {}))})</code> {state}"
    return (
        f'<li class="item tool{"" if ok else " failed"}" data-kind="tool_call">'
        f"{_details(head, _pre(d.get('result', '')), opened=opened)}</li>"
    )


def _work(node: RunNode) -> str:
    d = node.data
    label = "Worker" if d.get("success") else "Worker (did not finish)"
    return (
        f'<li class="item work" data-kind="work_result"><b>{label}</b>, attempt '
        f"{h(d.get('attempt'))}: <span class='answer'>{h(d.get('result', _message(node)))}</span></li>"  # noqa: E501
    )


def signal_chips(d: dict[str, Any]) -> str:
    """The completion signal of a validation as labelled chips."""
    signal = d.get("completion_signal") if isinstance(d.get("completion_signal"), dict) else {}
    assert isinstance(signal, dict)
    parts = []
    for key in ("confidence", "progress_made", "blocker_type", "suggested_strategy"):
        value = signal.get(key)
        if value is None:
            parts.append(f'<span class="chip">{h(key)}: -</span>')
            continue
        tone = "bad" if key == "blocker_type" else None
        parts.append(f'<span class="chip">{h(key)}: {badge(value, tone)}</span>')
    return f'<span class="signal">{"".join(parts)}</span>'


def _validation(node: RunNode) -> str:
    d = node.data
    how = "model check" if d.get("used_llm") else "code check"
    verdict = badge("approved") if d.get("approved") else badge("rejected")
    issues = "".join(f"<li>{h(i)}</li>" for i in d.get("issues") or [])
    cls = "ok" if d.get("approved") else "rejected"
    return (
        f'<li class="item validation {cls}" data-kind="validation"><b>Validator</b> '
        f"({h(how)}, {h(d.get('involvement_level'))}): {verdict} {signal_chips(d)}"
        + (f'<ul class="issues">{issues}</ul>' if issues else "")
        + "</li>"
    )


def _correction(node: RunNode) -> str:
    d = node.data
    budget = f"{h(d.get('retries_used'))}/{h(d.get('max_retries'))}"
    message = _message(node)
    return (
        f'<li class="item correction" data-kind="correction"><b>Correction</b> '
        f"{badge(d.get('action', 'retry'), 'warn')} (retries {budget}, blocker "
        f"{badge(d.get('blocker'), 'bad')}): {h(message)}</li>"
    )


def _warning(node: RunNode) -> str:
    message = _message(node)
    return f'<li class="item warning" data-kind="warning"><b>Warning</b>: {h(message)}</li>'


def _final(node: RunNode) -> str:
    d = node.data
    message = _message(node)
    return (
        f'<li class="item final" data-kind="final"><b>Answer</b> {badge(d.get("status"))}'
        f'<div class="answer final-text">{h(message)}</div>'
        f'<p class="muted">usage: {h(tokens(d.get("usage") or {}))}</p></li>'
    )


def _start(node: RunNode) -> str:
    message = _message(node)
    src = node.data.get("context_from")
    extra = f" · continues handover <code>{h(src)}</code>" if src else ""
    return f'<li class="item start muted" data-kind="start">{h(message)}{extra}</li>'


def _other(node: RunNode) -> str:
    message = _message(node)
    body = _pre(json.dumps(node.data, indent=2, default=str))
    head = f"{badge(node.kind, 'plain')} {h(message)}"
    return f'<li class="item other" data-kind="{h(node.kind)}">{_details(head, body)}</li>'


_RENDER: dict[str, Callable[[RunNode], str]] = {
    "start": _start,
    "plan": _plan,
    "tool_call": _tool,
    "work_result": _work,
    "validation": _validation,
    "correction": _correction,
    "warning": _warning,
    "final": _final,
}


def _subagent(node: RunNode, run_id: str) -> str:
    d = node.data
    end = node.end_event.data if node.end_event is not None else {}
    usage = end.get("usage") or {}
    state = badge(end.get("status")) if end else badge("running")
    counts = (
        f"{h(usage.get('requests', 0))} requests, {h(usage.get('tool_calls', 0))} tool calls"
        if end
        else ""
    )
    inner = "".join(render_item(child, run_id) for child in node.children)
    return (
        f'<li class="item subagent" data-kind="subagent"><div class="agenthead">'
        f"sub-agent <b>{h(node.persona)}</b> (context mode {h(d.get('context_mode'))}, "
        f"depth {h(d.get('depth'))}) {state} <span class='muted'>{counts}</span>"
        f'<div class="muted">task: {h(d.get("task"))}</div></div>'
        f'<ul class="tree">{inner}</ul></li>'
    )


def _subtask(node: RunNode, run_id: str) -> str:
    persona = node.data.get("persona")
    title = _message(node)
    inner = "".join(render_item(child, run_id) for child in node.children)
    return (
        f'<li class="subtask" data-kind="subtask"><h3>Subtask {h(node.subtask)}: {h(title)} '
        f'<span class="muted">(persona {h(persona)})</span></h3><ul class="items">{inner}</ul></li>'
    )


def render_item(node: RunNode, run_id: str) -> str:
    """One node (and what is inside it) as an ``<li>``."""
    if node.kind == "model_call" and node.call is not None:
        return _call(node, run_id)
    if node.kind == "subagent":
        return _subagent(node, run_id)
    if node.kind == "subtask":
        return _subtask(node, run_id)
    return _RENDER.get(node.kind, _other)(node)


def render_event(event: StoredEvent, run_id: str) -> str:
    """One event on its own (no tree): sub-agent starts and ends as one line each."""
    data = event.data  # shown as stored (redacted), whatever its shape
    persona = data.get("persona") if isinstance(data.get("persona"), str) else None
    node = RunNode(kind=event.kind, at=event.at, event=event, persona=persona)
    match typed(event):
        case SubagentStarted():
            text = f"starts (context mode {h(data.get('context_mode'))}): {h(data.get('task'))}"
        case SubagentEnded():
            text = f"finished {badge(data.get('status'))}"
        case SubtaskStarted():
            return (
                f'<li class="item muted" data-kind="subtask_start">next: subtask '
                f"{h(event.subtask)} starts: {h(event.message)}</li>"
            )
        case ToolCalled():
            return _tool(node, opened=True)  # on a call's page, what came back is the point
        case _:
            return render_item(node, run_id)
    return (
        f'<li class="item subagent" data-kind="subagent">sub-agent <b>{h(persona)}</b> {text}</li>'
    )


def agent_tree(root: RunNode, persona: str | None) -> str:
    """Who ran: the run's persona, and every sub-agent under the subtask that spawned it."""

    def nested(node: RunNode) -> str:
        items = []
        for child in node.children:
            if child.kind == "subagent":
                end = child.end_event.data.get("status") if child.end_event else "running"
                where = f"subtask {child.subtask}" if child.subtask else "turn"
                items.append(
                    f"<li>{h(child.persona)} {badge(end)} <span class='muted'>"
                    f"({h(where)})</span>{nested(child)}</li>"
                )
            elif child.kind == "subtask":
                items.append(nested(child))
        inner = "".join(items)
        return f"<ul>{inner}</ul>" if inner and node.kind != "subtask" else inner

    top = f"<li>{h(persona or '-')}{nested(root)}</li>"
    return f'<div class="agents"><b>Agents</b><ul>{top}</ul></div>'


def render_timeline(root: RunNode, run_id: str) -> str:
    """The whole timeline (an ordered list of items)."""
    items = "".join(render_item(child, run_id) for child in root.children)
    return f'<ol class="timeline items">{items}</ol>'
