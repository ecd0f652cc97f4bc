"""The viewer's comparison pages: two runs side by side, and a context diff beside the
budget bars of both calls (``personae runs compare`` and ``personae runs diff`` in HTML)."""

from __future__ import annotations

from personae.context.diff import ContextDiff, diff_calls
from personae.context.report import read_stored_budget
from personae.errors import UsageError
from personae.team.compare import CallSide, Comparison, compare_runs
from personae.ui._html import badge, h, layout, url
from personae.ui.budget import budget_panel
from personae.ui.data import Reader

__all__ = ["compare_page", "diff_page"]


def _side(side: CallSide | None, run_id: str) -> str:
    if side is None:
        return '<td class="muted">(no such call)</td>'
    signal = ", ".join(f"{k} {v}" for k, v in (side.completion_signal or {}).items() if v)
    recorded = (
        f'<p class="muted">from the record (call {side.recorded_from})</p>'
        if side.recorded_from is not None
        else ""
    )
    tools = "".join(f"<li><code>{h(t)}</code></li>" for t in side.tool_calls)
    return (
        f'<td><a href="{url("runs", run_id, "calls", side.seq)}">#{side.seq}</a> '
        f"{badge(side.role, 'role')} <code>{h(side.model)}</code>{recorded}"
        + (f'<pre class="answer">{h(side.answer)}</pre>' if side.answer else "")
        + (f'<ol class="items tool-calls">{tools}</ol>' if tools else "")
        + (f"<p>verdict {badge(side.verdict)} {h(signal)}</p>" if side.verdict else "")
        + f'<p class="muted">in {h(side.input_tokens)}, out {h(side.output_tokens)} tokens; '
        f"{h(side.seconds)} s</p></td>"
    )


def _comparison(c: Comparison) -> str:
    head = "".join(
        f'<th><a href="{url("runs", r.id)}">{h(r.id)}</a> {badge(r.status)}<br>'
        f"<code>{h(r.model)}</code><br>{r.calls} calls, in {r.input_tokens}, "
        f"out {r.output_tokens} tokens</th>"
        for r in (c.a, c.b)
    )
    rows = "".join(
        f'<tr class="{"same" if p.same else "differs"}"><td>{p.index}'
        f"{'' if p.same else ' ' + badge('differs', 'bad')}</td>"
        f"{_side(p.a, c.a.id)}{_side(p.b, c.b.id)}</tr>"
        for p in c.pairs
    )
    first = f"call {c.first_difference}" if c.first_difference else "none (same calls)"
    answers = "".join(f'<td><pre class="answer">{h(r.final_text)}</pre></td>' for r in (c.a, c.b))
    return (
        f"<p>First difference: <b>{h(first)}</b></p>"
        f'<table class="compare"><thead><tr><th>call</th>{head}</tr></thead>'
        f"<tbody>{rows}<tr><td>answer</td>{answers}</tr></tbody></table>"
    )


def compare_page(reader: Reader, run_a: str, run_b: str) -> str:
    """Two runs side by side, call by call."""
    runs = reader.run_store()
    if runs is None:
        raise UsageError("no runs stored here yet", file=reader.db)
    c = compare_runs(runs, run_a, run_b)
    return layout(f"{c.a.id} vs {c.b.id}", _comparison(c), crumbs=[("/", "runs")])


def _diff(d: ContextDiff) -> str:
    rows = "".join(
        f'<tr class="change-{h(s.change)}"><td><code>{h(s.tag)}</code></td>'
        f"<td>{badge(s.change, None if s.change == 'same' else 'bad')}</td>"
        f'<td class="num">{s.tokens_a:,}</td><td class="num">{s.tokens_b:,}</td>'
        f'<td class="num">{s.delta:+,}</td><td>{h(s.rule_a)} &rarr; {h(s.rule_b)}</td></tr>'
        for s in d.sections
    )
    changed = "".join(
        f"<h3><code>{h(s.tag)}</code>: {h(s.change)} ({s.delta:+,} tokens)</h3>"
        f'<pre class="diff">{h(chr(10).join(s.lines))}</pre>'
        for s in d.changed
    )
    return (
        f"<p>{h(d.a)} &rarr; {h(d.b)}: total {d.total_b - d.total_a:+,} tokens, "
        f"{len(d.changed)} of {len(d.sections)} sections changed</p>"
        '<table class="sections"><thead><tr><th>section</th><th>change</th><th>A</th>'
        f"<th>B</th><th>delta</th><th>rules</th></tr></thead><tbody>{rows}</tbody></table>"
        + (changed or '<p class="muted">The two assembled contexts are the same.</p>')
    )


def diff_page(reader: Reader, run_id: str, seq: int, other: str | None) -> str:
    """Call ``seq`` of a run against ``other`` (``RUN:CALL``; ``None``: the call before it):
    the section diff, beside both calls' budget bars."""
    runs = reader.run_store()
    if runs is None:
        raise UsageError("no runs stored here yet", file=reader.db)
    if other is None:
        other_ref = (run_id, seq - 1)
    else:
        run, _, call = other.rpartition(":")
        if not run or not call.isdigit():
            raise UsageError(f"with={other!r} is not RUN:CALL")
        other_ref = (run, int(call))
    d = diff_calls(runs, other_ref, (run_id, seq))
    calls = {c.seq: c for c in runs.model_calls(runs.get(other_ref[0]).id)}
    mine = {c.seq: c for c in runs.model_calls(runs.get(run_id).id)}
    bars = (
        f'<div class="side-by-side"><div><h2>A: {h(d.a)}</h2>'
        f"{budget_panel(read_stored_budget(calls[other_ref[1]].budget))}</div>"
        f"<div><h2>B: {h(d.b)}</h2>{budget_panel(read_stored_budget(mine[seq].budget))}</div></div>"
    )
    return layout(
        f"Context diff: {d.a} → {d.b}",
        f"<h2>What changed</h2>{_diff(d)}{bars}",
        crumbs=[
            ("/", "runs"),
            (url("runs", run_id), run_id),
            (url("runs", run_id, "calls", seq), f"#{seq}"),
        ],
    )
