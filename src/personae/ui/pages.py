"""The viewer's run pages: the runs list, a run's timeline, one model call."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from personae.context.report import read_stored_budget
from personae.errors import UnknownNameError
from personae.store.runs import RunRecord, RunStatus
from personae.team.events import EventKind
from personae.telemetry.runtree import build_tree, call_outcomes
from personae.ui._html import badge, call_tokens, duration, h, layout, short, tokens, url
from personae.ui.budget import budget_panel, notices, section_blocks
from personae.ui.data import Reader, RunView
from personae.ui.timeline import agent_tree, render_event, render_timeline
from personae.ui.usage import usage_panel

__all__ = ["call_page", "run_body", "run_page", "runs_page", "runs_table"]

_FILTERS = ("status", "persona", "model", "q")


def _matches(run: RunRecord, filters: Mapping[str, str]) -> bool:
    for key in ("status", "persona", "model"):
        want = filters.get(key)
        if want and (getattr(run, key) or "") != want:
            return False
    text = (filters.get("q") or "").lower()
    return not text or text in run.task.lower() or text in run.id.lower()


def _model(label: str, limit: int = 40) -> str:
    """A model label short enough for a column: the provider and the end of the name."""
    if len(label) <= limit:
        return label
    provider, _, name = label.partition(":")
    return f"{provider}:…{name[-(limit - len(provider) - 2) :]}"


def _select(name: str, values: list[str], chosen: str) -> str:
    options = [f'<option value="">any {h(name)}</option>']
    for value in values:
        sel = " selected" if value == chosen else ""
        options.append(f'<option value="{h(value)}"{sel}>{h(short(value, 50))}</option>')
    return f'<select name="{h(name)}">{"".join(options)}</select>'


def runs_table(reader: Reader, filters: Mapping[str, str]) -> str:
    """The table of runs matching ``filters`` (also served alone, for polling)."""
    runs = [r for r in reader.runs() if _matches(r, filters)]
    if not runs:
        return '<p class="empty">No runs match. Start one with <code>personae run TASK</code> or <code>personae demo --keep DIR</code>.</p>'  # noqa: E501
    rows = []
    live = False
    for r in runs:
        live = live or r.status == RunStatus.RUNNING
        rows.append(
            f'<tr data-run="{h(r.id)}"><td><a href="{url("runs", r.id)}"><code>{h(r.id)}</code>'
            f"</a></td><td>{badge(r.status)}</td><td>{h(r.persona or '-')}</td>"
            f'<td title="{h(r.model)}">{h(_model(r.model))}</td>'
            f"<td>{h(r.started_at[:19].replace('T', ' '))}</td>"
            f'<td class="num">{h(duration(r.started_at, r.finished_at))}</td>'
            f'<td class="num">{h(tokens(reader.run_tokens(r)))}</td>'
            f"<td>{h(short(r.task, 90))}</td></tr>"
        )
    return (
        f'<table class="runs" data-live="{"1" if live else "0"}"><thead><tr><th>run</th>'
        "<th>status</th><th>persona</th><th>model</th><th>started (UTC)</th><th>duration</th>"
        f"<th>tokens</th><th>task</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def runs_page(reader: Reader, filters: Mapping[str, str]) -> str:
    """The runs list with its filters."""
    runs = reader.runs()
    chosen = {k: filters.get(k, "") for k in _FILTERS}
    statuses = sorted({r.status.value for r in runs})
    personas = sorted({r.persona for r in runs if r.persona})
    models = sorted({r.model for r in runs})
    query = h(urlencode({k: v for k, v in chosen.items() if v}))
    form = (
        '<form class="filters" method="get" action="/">'
        + _select("status", statuses, chosen["status"])
        + _select("persona", personas, chosen["persona"])
        + _select("model", models, chosen["model"])
        + f'<input type="search" name="q" placeholder="task or id" value="{h(chosen["q"])}">'
        '<button type="submit">filter</button> <a href="/">clear</a></form>'
    )
    body = (
        f'<p class="muted">Project <code>{h(reader.root)}</code> · {len(runs)} run(s) stored</p>'
        f'{form}<div id="runs" data-poll="/fragments/runs?{query}">'
        f"{runs_table(reader, chosen)}</div>"
    )
    return layout("Runs", body)


def run_body(view: RunView) -> str:
    """Everything on a run's page below the title (also served alone for live updates)."""
    run = view.run
    tree = build_tree(view.events, view.calls, started_at=run.started_at)
    usage = run.usage or {
        "input_tokens": sum(int(c.usage.get("input_tokens") or 0) for c in view.calls),
        "output_tokens": sum(int(c.usage.get("output_tokens") or 0) for c in view.calls),
    }
    source = view.context_from
    facts = [
        ("status", badge(run.status)),
        ("persona", h(run.persona or "-")),
        ("model", f"<code>{h(run.model)}</code>"),
        ("session", f"<code>{h(run.session_id or '-')}</code>"),
        ("started", h(run.started_at)),
        ("duration", h(duration(run.started_at, run.finished_at))),
        ("tokens", h(tokens(usage))),
        ("model calls", str(len(view.calls))),
    ]
    if source:
        facts.append(("continues", f"<code>{h(source)}</code>"))
    if run.replay_of:
        original = f'<a href="{url("runs", run.replay_of)}">{h(run.replay_of)}</a>'
        side = f'<a href="{url("compare", run.replay_of, run.id)}">compare</a>'
        facts.append(("replay of", f"{original} ({side})"))
    dl = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
    final = ""
    if run.final_text and not any(e.kind == EventKind.FINAL for e in view.events):
        final = f'<section class="final"><h2>Result</h2><pre>{h(run.final_text)}</pre></section>'
    return (
        f'<div class="summary"><dl class="facts">{dl}</dl>{agent_tree(tree, run.persona)}</div>'
        f'<p class="task"><b>Task:</b> {h(run.task)}</p>{usage_panel(view.usage, run.id)}'
        f"<h2>Timeline</h2>{render_timeline(tree, run.id)}{final}{result_section(view)}"
    )


def result_section(view: RunView) -> str:
    """The run's result as its ``final`` event records it (what the Python API returned
    and ``--json`` printed): status, error, each subtask, warnings, files written."""
    if view.unreadable:
        return (
            '<section class="result" data-kind="result"><h2>Result</h2>'
            f'<p class="muted">not readable: {h(view.unreadable)}</p></section>'
        )
    result = view.result
    if result is None:  # running, or crashed without a final event
        return ""
    rows = "".join(
        f'<tr data-subtask="{t.number}"><td>{t.number}</td><td>{badge(t.status)}</td>'
        f"<td>{t.attempts}</td><td>{h(t.description)}</td><td>{h(t.reason or '-')}</td></tr>"
        for t in result.subtasks
    )
    facts = [
        ("status", badge(result.status)),
        ("error", h(result.error) if result.error else "-"),
        ("rejected validations", str(result.failure_count)),
        ("files written", ", ".join(f"<code>{h(f)}</code>" for f in result.files_written) or "-"),
    ]
    warnings = "".join(f"<li>{h(w)}</li>" for w in result.warnings)
    return (
        '<section class="result" data-kind="result"><h2>Result</h2><dl class="facts">'
        + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)
        + "</dl>"
        + (
            '<table class="subtasks"><tr><th>#</th><th>status</th><th>attempts</th>'
            f"<th>subtask</th><th>why not validated</th></tr>{rows}</table>"
            if rows
            else ""
        )
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
        + "</section>"
    )


def run_page(view: RunView) -> str:
    """A run's page; while it runs, the body refreshes itself (server-sent events)."""
    run = view.run
    live = run.status == RunStatus.RUNNING
    attrs = (
        f' data-stream="{url("runs", run.id, "stream")}" data-fragment="{url("fragments", "runs", run.id)}"'  # noqa: E501
        if live
        else ""
    )
    note = '<p class="live">live: updates as the run goes on</p>' if live else ""
    body = f'{note}<div id="run"{attrs}>{run_body(view)}</div>'
    return layout(f"Run {run.id}", body, crumbs=[("/", "runs")])


def _outcome(view: RunView, seq: int) -> str:
    events = call_outcomes(view.events, view.calls).get(seq, [])
    if not events:
        return '<p class="muted">Nothing recorded after this call (yet).</p>'
    items = "".join(render_event(event, view.run.id) for event in events)
    return f'<ol class="items outcome">{items}</ol>'


def _answer(view: RunView, seq: int) -> str:
    """The stored answer (text, tool calls); for calls stored before answers were kept, the
    steps the run recorded after the call."""
    answer = next(c.answer for c in view.calls if c.seq == seq)
    if answer is None:
        return (
            '<p class="muted">This call was stored before answers were kept; what the run '
            "recorded after it:</p>" + _outcome(view, seq)
        )
    facts = f"finish reason: {answer.finish_reason or 'not reported'}, {answer.chars} characters"
    if answer.cut:
        facts += "; cut to the stored size (the cut piece says how much)"
    parts = [f'<p class="muted">{h(facts)}</p>']
    if answer.text:
        parts.append(f'<pre class="answer model-answer">{h(answer.text)}</pre>')
    if answer.tool_calls:
        items = "".join(
            f'<li><b>{h(call.name)}</b><pre class="answer">{h(call.args)}</pre></li>'
            for call in answer.tool_calls
        )
        parts.append(f'<h3>Tool calls</h3><ol class="items tool-calls">{items}</ol>')
    if not answer.text and not answer.tool_calls:
        parts.append('<p class="muted">The answer was empty.</p>')
    return "".join(parts)


def call_page(view: RunView, seq: int) -> str:
    """One model call: budget bar and table, the context section by section, what came back."""
    calls = {c.seq: c for c in view.calls}
    if seq not in calls:
        raise UnknownNameError("model call", str(seq), [str(s) for s in calls])
    call = calls[seq]
    where = f"subtask {call.subtask}" if call.subtask else "turn"
    nav = []
    if seq - 1 in calls:
        nav.append(f'<a href="{url("runs", view.run.id, "calls", seq - 1)}">&larr; #{seq - 1}</a>')
    if seq + 1 in calls:
        nav.append(f'<a href="{url("runs", view.run.id, "calls", seq + 1)}">#{seq + 1} &rarr;</a>')
    if seq - 1 in calls:
        nav.append(f'<a href="{url("runs", view.run.id, "calls", seq, "diff")}">what changed '
                   f"since #{seq - 1}</a>")  # fmt: skip
    found = notices(call.context_text)
    notice_list = (
        "<ul class='notices'>" + "".join(f"<li><mark>{h(n)}</mark></li>" for n in found) + "</ul>"
        if found
        else '<p class="muted">No truncation notice: every present section was kept whole.</p>'
    )
    usage: dict[str, Any] = call.usage
    report = read_stored_budget(call.budget)
    body = (
        f'<p class="nav">{" · ".join(nav)}</p>'
        f'<dl class="facts"><dt>role</dt><dd>{badge(call.role, "role")}</dd>'
        f"<dt>persona</dt><dd>{h(call.persona or '-')}</dd><dt>where</dt><dd>{h(where)}</dd>"
        f"<dt>model</dt><dd><code>{h(call.model)}</code></dd>"
        f"<dt>tokens</dt><dd>{h(call_tokens(usage, long=True))}</dd>"
        f"<dt>at</dt><dd>{h(call.at)}</dd></dl>"
        f"{budget_panel(report)}<h2>Notices</h2>{notice_list}"
        f'<h2>Rendered prompt</h2><div class="prompt">{section_blocks(call.context_text, report)}</div>'  # noqa: E501
        f"<h2>The model's answer</h2>{_answer(view, seq)}"
    )
    return layout(
        f"Model call #{seq}",
        body,
        crumbs=[("/", "runs"), (url("runs", view.run.id), view.run.id)],
    )
