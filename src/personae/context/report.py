"""The budget report: per section requested, allotted and kept tokens, and the totals."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from personae.context.modes import ContextMode
from personae.security.policy import redact_secrets

__all__ = [
    "BudgetReport",
    "HistoryPath",
    "SectionReport",
    "StoredBudget",
    "SubagentBrief",
    "read_stored_budget",
    "stored_budget_json",
]

HistoryPath = Literal["A", "B", "none"]

_PATHS = {
    "A": "A (stored running summary + recent messages)",
    "B": "B (recent messages only, trimmed; no summarizer)",
    "none": "none (no conversation)",
}


class SectionReport(BaseModel):
    """One section's line in the report."""

    model_config = ConfigDict(frozen=True)

    tag: str
    """The section's XML tag."""
    source: str
    """Where the content came from."""
    requested: int
    """Tokens of the full content."""
    allotted: int
    """Tokens the section was allowed."""
    kept: int
    """Tokens of the rendered content."""
    rule: str
    """The rule that fired (full, pinned, cap, cut, outline, dropped, evicted, removed, absent)."""
    detail: str = ""
    """Where the content was read from (file path, session, ...)."""
    target: int | None = None
    """The section's target share of the budget in tokens (``share`` in its profile);
    ``None``: no target. Informative: fitting cuts by priority."""


class BudgetReport(BaseModel):
    """What went into one assembled context and why."""

    model_config = ConfigDict(frozen=True)

    role: str
    snapshot_id: str
    counter: str
    """Name of the token counter used."""
    counter_exact: bool
    """True when the counter is the model's own tokenizer."""
    history_path: HistoryPath
    """A: summary + recent messages; B: trim only; none: no conversation."""
    budget: int
    window: int | None = None
    share: float | None = None
    total: int
    """Exact token count of the rendered text (tags, notices and separators included)."""
    overhead: int
    """Tokens of tags and separators (``total`` minus the kept content)."""
    refits: int = 0
    """Refits after the exact verification (tokens merged across a boundary)."""
    sections: list[SectionReport]
    warnings: list[str] = []
    """Problems met while building the snapshot (the turn went on)."""

    @property
    def within_budget(self) -> bool:
        """True when ``total`` is at most ``budget`` (always, for a fitted context)."""
        return self.total <= self.budget

    def _pct(self, tokens: int) -> str:
        base = self.window or self.budget
        return f"{100 * tokens / base:.1f}%" if base else "-"

    def to_text(self) -> str:
        """The report as an aligned text table (section, tokens, share, status)."""
        base = "window" if self.window else "budget"
        lines = [f"Context Budget Report (role: {self.role}, snapshot {self.snapshot_id})"]
        lines.append(
            f"  {'Section':<22}{'Kept':>9} {'% ' + base:>10}{'Requested':>11}{'Allotted':>10}  Rule"
        )
        for s in self.sections:
            name = s.tag.replace("_", " ").title() + ":"
            lines.append(
                f"  {name:<22}{s.kept:>9,} {self._pct(s.kept):>10}{s.requested:>11,}"
                f"{s.allotted:>10,}  {s.rule}"
            )
        lines.append(
            f"  {'Tags/separators:':<22}{self.overhead:>9,} {self._pct(self.overhead):>10}"
        )
        lines.append("  " + "─" * 29)
        counted = "exact count" if self.counter_exact else f"estimate, {self.counter}"
        total = f"{self.total:>9,} {self._pct(self.total):>10}"
        lines.append(f"  {'Context total:':<22}{total}  ({counted})")
        share = (
            f" ({self.share:.0%} of {self.window:,} window)" if self.share and self.window else ""
        )
        lines.append(f"  {'Budget:':<22}{self.budget:>9,} {self._pct(self.budget):>10}{share}")
        status = "Within budget" if self.within_budget else "OVER BUDGET"
        lines.append(f"  {'Status:':<22}{status}")
        kind = "exact" if self.counter_exact else "estimate"
        lines.append(f"  {'Counter:':<22}{self.counter} ({kind})")
        lines.append(f"  {'History:':<22}{_PATHS[self.history_path]}")
        lines.extend(f"  {'Warning:':<22}{w}" for w in self.warnings)
        return "\n".join(lines)


class SubagentBrief(BaseModel):
    """What a sub-agent's call is sent instead of a fitted context: its task in the
    persona's context mode (stored where a budget report is, shown by the viewer)."""

    model_config = ConfigDict(frozen=True)

    context_mode: ContextMode
    """What context it inherits."""
    depth: int
    """Sub-agent depth."""
    tokens: int | None
    """Tokens of its prompt (``None``: no turn to count with)."""
    counter: str | None
    """The token counter's name (``None``: no turn)."""


StoredBudget = BudgetReport | SubagentBrief
"""What a stored model call's budget column holds: a fitted context's report, or a
sub-agent's brief."""


def read_stored_budget(raw: Mapping[str, Any] | None) -> StoredBudget | None:
    """A stored model call's budget column read back into its model.

    The one reader of that column (the viewer and the OpenTelemetry export use it).
    ``None`` when nothing was recorded or the row does not validate (an older version
    stored another form): the caller says "not recorded in this form", never fails.
    """
    if not raw:
        return None
    model: type[StoredBudget] = (
        SubagentBrief if "context_mode" in raw and "sections" not in raw else BudgetReport
    )
    try:
        return model.model_validate(dict(raw))
    except ValidationError:
        return None


def stored_budget_json(raw: Mapping[str, Any] | None) -> dict[str, Any]:
    """A stored call's budget as the viewer and ``personae runs show --json`` hand it out:
    its model's dump (:func:`read_stored_budget`), secrets redacted; ``{}`` when nothing
    was recorded in a form this version reads (never the raw column)."""
    budget = read_stored_budget(raw)
    if budget is None:
        return {}
    dumped: dict[str, Any] = redact_secrets(budget.model_dump(mode="json"))
    return dumped
