"""What changed in an assembled context between two model calls (``personae runs diff``).

An assembled context is a run of top-level sections (``<tag>`` ... ``</tag>``) in the
order the engine renders them, plus the role's instructions outside any section. Its
budget report says, per section, how many tokens were requested and kept and which rule
fired. :func:`diff_contexts` compares two of them section by section: each section is
``same``, ``added``, ``removed``, ``cut`` (fewer tokens kept by a fitting rule),
``summarized`` (conversation moved into the running summary) or ``changed``, with its token
delta and the lines that changed (unified-diff style). Because the engine renders sections
in a stable order and cuts them at stable points, a small change makes a small diff.
"""

from __future__ import annotations

import difflib
import re
import textwrap
from typing import Literal

from pydantic import BaseModel, ConfigDict

from personae.context.report import BudgetReport, SectionReport, StoredBudget, read_stored_budget
from personae.errors import UsageError
from personae.store.runs import RunStore

__all__ = [
    "ContextDiff",
    "SectionChange",
    "SectionDiff",
    "diff_calls",
    "diff_contexts",
    "render_diff",
    "split_sections",
]  # fmt: skip

SectionChange = Literal["same", "added", "removed", "cut", "summarized", "changed"]
"""How one section changed between two assembled contexts."""

INSTRUCTIONS = "(instructions)"
"""The pseudo-section of the text outside every tagged section (the role's instructions)."""

_ABSENT = frozenset({"absent", "dropped", "removed"})
_CUT_RULES = ("budget:", "cut", "outline", "shrunk", "cap", "evicted")
_SUMMARY_TAGS = frozenset({"conversation_summary", "recent_messages"})
_OPEN = re.compile(r"^<([A-Za-z_][\w-]*)(?:\s[^>]*)?>\s*$")


class SectionDiff(BaseModel):
    """One section of two assembled contexts."""

    model_config = ConfigDict(frozen=True)

    tag: str
    change: SectionChange
    rule_a: str
    """The budget rule that fired for the section in A (``absent`` when not there)."""
    rule_b: str
    tokens_a: int
    """Tokens kept in A."""
    tokens_b: int
    delta: int
    """``tokens_b - tokens_a``."""
    lines: list[str]
    """The changed lines, unified-diff style (``-`` A only, ``+`` B only, `` `` context)."""


class ContextDiff(BaseModel):
    """Two assembled contexts, section by section."""

    model_config = ConfigDict(frozen=True)

    a: str
    """Label of the first call (``RUN:CALL``)."""
    b: str
    total_a: int
    """Tokens of the whole assembled context A (its budget report's total)."""
    total_b: int
    budget_a: int | None
    budget_b: int | None
    sections: list[SectionDiff]

    @property
    def changed(self) -> list[SectionDiff]:
        """The sections that are not the same."""
        return [s for s in self.sections if s.change != "same"]


def split_sections(text: str, tags: list[str]) -> dict[str, str]:
    """``tag -> body`` of the top-level sections of ``text`` named in ``tags`` (their
    opening and closing tag lines included), and :data:`INSTRUCTIONS` for the rest (the
    blank lines that separate sections left out: a section more or less is no change to
    the instructions)."""
    known = set(tags)
    bodies: dict[str, list[str]] = {INSTRUCTIONS: []}
    current: str | None = None
    blanks: list[str] = []  # blank lines outside sections, kept only between instructions
    for line in text.splitlines():
        if current is None:
            match = _OPEN.match(line)
            if match and match.group(1) in known and match.group(1) not in bodies:
                current = match.group(1)
                bodies[current] = [line]
                blanks = []
                continue
            if not line.strip():
                blanks.append(line)
                continue
            if bodies[INSTRUCTIONS]:
                bodies[INSTRUCTIONS].extend(blanks)
            blanks = []
            bodies[INSTRUCTIONS].append(line)
            continue
        bodies[current].append(line)
        if line.strip() == f"</{current}>":
            current = None
    return {tag: "\n".join(lines) for tag, lines in bodies.items()}


def _sections(budget: StoredBudget | None) -> dict[str, SectionReport]:
    """The report's sections by tag (none for a sub-agent's brief or no report)."""
    if not isinstance(budget, BudgetReport):
        return {}
    return {s.tag: s for s in budget.sections if s.tag}


def _rule(report: SectionReport | None, present: bool) -> str:
    if report is None:
        return "present" if present else "absent"
    return report.rule


def _classify(
    tag: str, bodies: tuple[str, str], rules: tuple[str, str], kept: tuple[int, int]
) -> SectionChange:
    (body_a, body_b), (rule_a, rule_b), (kept_a, kept_b) = bodies, rules, kept
    here_a = bool(body_a.strip()) and rule_a not in _ABSENT
    here_b = bool(body_b.strip()) and rule_b not in _ABSENT
    if not here_a and not here_b:
        return "same"
    if not here_a:
        return "added"
    if not here_b:
        return "removed"
    if body_a == body_b:
        return "same"
    if tag in _SUMMARY_TAGS and ("evicted" in rule_b or tag == "conversation_summary"):
        return "summarized"
    if rule_b.startswith(_CUT_RULES) and kept_b < kept_a and rule_b != rule_a:
        return "cut"
    return "changed"


def _lines(body_a: str, body_b: str) -> list[str]:
    diff = difflib.unified_diff(body_a.splitlines(), body_b.splitlines(), lineterm="", n=1)
    return [line for line in diff if not line.startswith(("---", "+++"))]


def diff_contexts(
    a: tuple[str, str, StoredBudget | None], b: tuple[str, str, StoredBudget | None]
) -> ContextDiff:
    """Compare two assembled contexts, each given as ``(label, context_text, budget)``
    (the stored budget as :func:`~personae.context.report.read_stored_budget` reads it;
    without a report every section's tokens are estimated). Sections come in A's order,
    then B's new ones."""
    label_a, text_a, budget_a = a
    label_b, text_b, budget_b = b
    reports_a, reports_b = _sections(budget_a), _sections(budget_b)
    order = [INSTRUCTIONS, *reports_a, *(t for t in reports_b if t not in reports_a)]
    bodies_a = split_sections(text_a, list(reports_a))
    bodies_b = split_sections(text_b, list(reports_b))
    for tag in [*bodies_a, *bodies_b]:  # a tagged section the report did not list
        if tag not in order:
            order.append(tag)
    sections: list[SectionDiff] = []
    for tag in order:
        body_a, body_b = bodies_a.get(tag, ""), bodies_b.get(tag, "")
        report_a, report_b = reports_a.get(tag), reports_b.get(tag)
        rule_a = _rule(report_a, bool(body_a.strip()))
        rule_b = _rule(report_b, bool(body_b.strip()))
        kept_a = report_a.kept if report_a else _estimate(body_a)
        kept_b = report_b.kept if report_b else _estimate(body_b)
        change = _classify(tag, (body_a, body_b), (rule_a, rule_b), (kept_a, kept_b))
        sections.append(SectionDiff(
            tag=tag, change=change, rule_a=rule_a, rule_b=rule_b, tokens_a=kept_a,
            tokens_b=kept_b, delta=kept_b - kept_a,
            lines=[] if change == "same" else _lines(body_a, body_b),
        ))  # fmt: skip
    whole_a = budget_a if isinstance(budget_a, BudgetReport) else None
    whole_b = budget_b if isinstance(budget_b, BudgetReport) else None
    return ContextDiff(
        a=label_a, b=label_b, total_a=whole_a.total if whole_a else 0,
        total_b=whole_b.total if whole_b else 0,
        budget_a=whole_a.budget if whole_a else None,
        budget_b=whole_b.budget if whole_b else None, sections=sections,
    )  # fmt: skip


def diff_calls(runs: RunStore, a: tuple[str, int], b: tuple[str, int]) -> ContextDiff:
    """The assembled contexts of two stored model calls, each ``(run id, call number)``
    (unique run id prefixes work), compared; an unknown run or call is a ``UsageError``."""
    sides = []
    for run_id, seq in (a, b):
        record = runs.get(run_id)
        calls = runs.model_calls(record.id)
        if not 1 <= seq <= len(calls):
            raise UsageError(
                f"run {record.id} has {len(calls)} model call(s): no call {seq}", field="CALL"
            )
        call = calls[seq - 1]
        budget = read_stored_budget(call.budget)
        sides.append((f"{record.id}:{seq} ({call.role})", call.context_text, budget))
    return diff_contexts(sides[0], sides[1])


def _estimate(body: str) -> int:
    """Tokens of a section the budget report does not list (the instructions): a
    characters/4 estimate, marked as such where it is shown."""
    return (len(body) + 3) // 4


def render_diff(diff: ContextDiff, *, width: int = 80, max_lines: int | None = 40) -> str:
    """The diff as text: a line per section (change, tokens, delta, rules), then each
    changed section's lines (``max_lines`` per section; ``None``: all). Lines longer than
    ``width`` wrap (nothing is cut)."""
    head = [f"--- {diff.a}  ({diff.total_a} tokens of {diff.budget_a or '?'})",
            f"+++ {diff.b}  ({diff.total_b} tokens of {diff.budget_b or '?'})",
            f"total {diff.total_b - diff.total_a:+d} tokens; "
            f"{len(diff.changed)} of {len(diff.sections)} sections changed"]  # fmt: skip
    for s in diff.sections:
        rules = s.rule_a if s.rule_a == s.rule_b else f"{s.rule_a} -> {s.rule_b}"
        estimate = " (estimate)" if s.tag == INSTRUCTIONS else ""
        head.append(f"{s.tag:<22} {s.change:<10} {s.tokens_a:>6} -> {s.tokens_b:<6} "
                    f"{s.delta:+d}{estimate}  {rules}")  # fmt: skip
    out = [piece for line in head for piece in _fold(line, width)]
    for s in diff.changed:
        out += ["", *_fold(f"@@ {s.tag}: {s.change} ({s.delta:+d} tokens) @@", width)]
        shown = s.lines if max_lines is None else s.lines[:max_lines]
        for line in shown:
            out += _wrap(line, width)
        if len(shown) < len(s.lines):
            more = f"  … {len(s.lines) - len(shown)} more line(s) (--full shows them)"
            out += _fold(more, width)
    return "\n".join(out)


def _fold(line: str, width: int) -> list[str]:
    """A line of the summary, wrapped at ``width`` (continuations indented)."""
    if len(line) <= width:
        return [line]
    return textwrap.wrap(line, width, subsequent_indent="    ", break_long_words=True) or [""]


def _wrap(line: str, width: int) -> list[str]:
    if len(line) <= width:
        return [line]
    mark = line[:1]
    return [line[i : i + width - 1] if i == 0 else mark + line[i : i + width - 1]
            for i in range(0, len(line), width - 1)]  # fmt: skip
