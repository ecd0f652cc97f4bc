"""Budget bars and the assembled context split into its sections.

A budget report (``BudgetReport`` as stored with each model call, read back by
:func:`personae.context.report.read_stored_budget`) becomes a bar with one segment per
section: kept tokens solid, tokens cut away hatched, sections dropped entirely hatched
red. A sub-agent's call shows its brief; a row that is not a report in this version's
form (nothing recorded, or an older form) says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from personae.context.report import BudgetReport, SectionReport, StoredBudget, SubagentBrief
from personae.ui._html import badge, h

__all__ = ["Shown", "budget_panel", "mini_bar", "notices", "section_blocks", "sections_of"]

_DROPPED = ("dropped", "removed", "evicted")
_NOTICE = re.compile(
    r"^\s*\[[^\n]*(omitted|truncated|shortened|evicted|the budget)[^\n]*\]\s*$", re.MULTILINE
)
"""A line the context engine left where it cut something (``[... omitted ...]``)."""
_PALETTE = 8
NOT_RECORDED = (
    "No budget report in this form: nothing was recorded for this call, or an older "
    "version stored it in another form."
)
"""What the viewer says for a stored budget that does not read as a report or a brief."""


@dataclass(frozen=True)
class Shown:
    """One section as the viewer shows it: the report's line and its ``state``."""

    section: SectionReport
    kept: int
    requested: int
    state: str
    """``kept`` (whole), ``cut`` (some tokens omitted), ``dropped`` (nothing kept of
    present content) or ``absent`` (no content)."""

    @property
    def tag(self) -> str:
        return self.section.tag

    @property
    def rule(self) -> str:
        return self.section.rule


def _state(kept: int, requested: int, rule: str) -> str:
    if requested == 0 and kept == 0:
        return "absent"
    if kept == 0 or any(word in rule for word in _DROPPED):
        return "dropped"  # gone, or only its notice is left
    if kept < requested or "cut" in rule or "shrunk" in rule:
        return "cut"
    return "kept"


def sections_of(budget: StoredBudget | None) -> list[Shown]:
    """The report's sections with their state (none for a brief or no report)."""
    if not isinstance(budget, BudgetReport):
        return []
    out = []
    for s in budget.sections:
        kept, requested = max(0, s.kept), max(0, s.requested)
        out.append(Shown(s, kept, requested, _state(kept, requested, s.rule)))
    return out


def _segments(report: BudgetReport) -> str:
    """The section bar, its full width the budget (or what was asked for, when more): kept
    tokens solid, cut ones hatched, the budget left unused as a pale segment at the end."""
    sections = [s for s in sections_of(report) if s.state != "absent"]
    overhead = max(0, report.overhead)
    limit = max(0, report.budget)
    asked = sum(max(s.kept, s.requested) for s in sections) + overhead
    scale = max(asked, limit)
    if scale == 0:
        return '<span class="seg empty" style="width:100%"></span>'
    parts = []
    for i, s in enumerate(sections):
        color = f"c{i % _PALETTE}"
        if s.kept:
            tip = f"{s.tag}: {s.kept:,} tokens kept ({s.rule})"
            parts.append(
                f'<span class="seg {color}" style="width:{100 * s.kept / scale:.2f}%" '
                f'title="{h(tip)}" data-tag="{h(s.tag)}"></span>'
            )
        lost = s.requested - s.kept
        if lost > 0:
            word = "dropped" if s.state == "dropped" else "cut"
            tip = f"{s.tag}: {lost:,} of {s.requested:,} tokens {word} ({s.rule})"
            parts.append(
                f'<span class="seg lost {word}" style="width:{100 * lost / scale:.2f}%" '
                f'title="{h(tip)}" data-tag="{h(s.tag)}" data-state="{word}"></span>'
            )
    if overhead:
        tip = f"tags and separators: {overhead:,} tokens"
        parts.append(
            f'<span class="seg overhead" style="width:{100 * overhead / scale:.2f}%" '
            f'title="{h(tip)}"></span>'
        )
    free = limit - sum(s.kept for s in sections) - overhead
    if free > 0:
        tip = f"{free:,} of the budget's {limit:,} tokens unused"
        parts.append(
            f'<span class="seg free" style="width:{100 * free / scale:.2f}%" '
            f'title="{h(tip)}"></span>'
        )
    return "".join(parts)


def mini_bar(budget: StoredBudget | None) -> str:
    """A thin section bar with the total, for the timeline (empty string without a report)."""
    if isinstance(budget, SubagentBrief):
        if budget.tokens is None:
            return ""
        mode = f" · context mode {h(budget.context_mode)}" if budget.context_mode else ""
        return (
            f'<div class="mini"><span class="muted">context {budget.tokens:,} tokens{mode}'
            "</span></div>"
        )
    if budget is None or not budget.sections:
        return ""
    total, limit = max(0, budget.total), max(0, budget.budget)
    marks = [s for s in sections_of(budget) if s.state in ("cut", "dropped")]
    flag = f" · {badge(f'{len(marks)} cut', 'warn')}" if marks else ""
    return (
        f'<div class="mini"><div class="bar" role="img" aria-label="context sections">'
        f'{_segments(budget)}</div><span class="muted">context {total:,} of {limit:,} '
        f"tokens{flag}</span></div>"
    )


def budget_panel(budget: StoredBudget | None) -> str:
    """The full budget view: use of the budget, the section bar, and the table."""
    if budget is None:
        return (
            f'<section class="budget"><h2>Budget</h2><p class="muted">{NOT_RECORDED}</p></section>'
        )
    if isinstance(budget, SubagentBrief) or not budget.sections:
        facts = "".join(
            f"<dt>{h(k.replace('_', ' '))}</dt><dd>{h(v)}</dd>"
            for k, v in budget.model_dump(mode="json").items()
        )
        return (
            '<section class="budget"><h2>Budget</h2><p class="muted">No per-section report: '
            "this context was not assembled by the context engine's profiles (a sub-agent "
            "gets its persona prompt and the parts its context mode passes).</p>"
            f'<dl class="facts">{facts}</dl></section>'
        )
    sections = sections_of(budget)
    total, limit = max(0, budget.total), max(0, budget.budget)
    window = max(0, budget.window or 0)
    share = budget.share
    use = min(100.0, 100 * total / limit) if limit else 0.0
    over = " over" if limit and total > limit else ""
    of_window = (
        f" ({share * 100:g}% of a {window:,}-token window)" if share is not None and window else ""
    )
    rows = []
    for i, s in enumerate(sections):
        swatch = f'<span class="swatch c{i % _PALETTE}"></span>' if s.kept else ""
        state = "" if s.state in ("kept", "absent") else " " + badge(s.state, "bad")
        rows.append(
            f'<tr class="sec-{h(s.state)}" data-tag="{h(s.tag)}"><td>{swatch}'
            f"<code>{h(s.tag)}</code></td><td>{h(s.section.source)}</td>"
            f'<td class="num">{s.kept:,}</td><td class="num">{s.requested:,}</td>'
            f'<td class="num">{max(0, s.section.allotted):,}</td>'
            f"<td>{badge(s.rule or '-')}{state}</td>"
            f'<td class="muted">{h(s.section.detail)}</td></tr>'
        )
    warnings = "".join(f"<li>{h(w)}</li>" for w in budget.warnings)
    counter = h(budget.counter) + (" (exact)" if budget.counter_exact else " (estimate)")
    return (
        f'<section class="budget"><h2>Budget</h2>'
        f"<p>context {total:,} of {limit:,} tokens used{of_window}; counter {counter}; "
        f"history path {h(budget.history_path)}</p>"
        f'<div class="bar use{over}" title="{use:.1f}% of the budget">'
        f'<span class="seg fill" style="width:{use:.2f}%"></span></div>'
        f'<p class="muted">Sections (kept solid, cut or dropped hatched):</p>'
        f'<div class="bar big" role="img" aria-label="sections">{_segments(budget)}</div>'
        '<table class="sections"><thead><tr><th>section</th><th>source</th><th>kept</th>'
        "<th>requested</th><th>allotted</th><th>rule</th><th>from</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        f"<p class='muted'>tags and separators: {max(0, budget.overhead):,} tokens</p>"
        + (f'<ul class="warnings">{warnings}</ul>' if warnings else "")
        + "</section>"
    )


def notices(text: str) -> list[str]:
    """The truncation notices left in an assembled context (bracketed lines that say what was
    omitted, truncated or shortened to fit the budget)."""
    return [m.group(0).strip() for m in _NOTICE.finditer(text)]


def _mark(text: str) -> str:
    out, last = [], 0
    for m in _NOTICE.finditer(text):
        out.append(h(text[last : m.start()]))
        out.append(f'<mark class="notice">{h(m.group(0))}</mark>')
        last = m.end()
    out.append(h(text[last:]))
    return "".join(out)


def section_blocks(text: str, budget: StoredBudget | None) -> str:
    """The assembled context, one collapsible block per top-level section tag, notices marked."""
    tags = {s.tag: s for s in sections_of(budget)}
    names = "|".join(re.escape(t) for t in tags) or "(?!x)x"
    pattern = re.compile(r"^<(" + names + r")(?:\s[^>\n]*)?>\n.*?^</\1>$", re.MULTILINE | re.DOTALL)
    blocks, last = [], 0
    for m in pattern.finditer(text):
        if text[last : m.start()].strip():
            blocks.append(_block("role instructions", text[last : m.start()]))
        s = tags[m.group(1)]
        label = f"<code>&lt;{h(s.tag)}&gt;</code> {s.kept:,} tokens " + badge(s.rule or "-")
        blocks.append(_block(label, m.group(0), raw_label=True, state=s.state))
        last = m.end()
    if text[last:].strip():
        label = "the role's own input (after the shared sections)" if blocks else "the prompt"
        blocks.append(_block(label, text[last:]))
    return "".join(blocks)


def _block(label: str, body: str, *, raw_label: bool = False, state: str = "") -> str:
    head = label if raw_label else h(label)
    return (
        f'<details class="ctx {h(state)}" open><summary>{head}</summary>'
        f"<pre>{_mark(body)}</pre></details>"
    )
