"""The viewer's budget bars: their full width is the budget, not the context."""

from __future__ import annotations

import re

from personae.context.report import BudgetReport
from personae.ui.budget import budget_panel, mini_bar


def _widths(html: str) -> dict[str, float]:
    """Width (percent) of each kind of segment in the first section bar of ``html``."""
    bar = html.split(
        'aria-label="context sections">' if "mini" in html else 'aria-label="sections">'
    )[1]
    bar = bar.split("</div>")[0]
    out: dict[str, float] = {}
    for cls, width in re.findall(r'class="seg ([a-z0-9 ]+)" style="width:([0-9.]+)%"', bar):
        kind = "free" if cls == "free" else "lost" if cls.startswith("lost") else cls
        kind = "kept" if kind.startswith("c") else kind
        out[kind] = out.get(kind, 0.0) + float(width)
    return out


def _report(budget: int, kept: int, requested: int, overhead: int = 0) -> BudgetReport:
    return BudgetReport.model_validate({
        "role": "worker", "snapshot_id": "s", "counter": "chars", "counter_exact": False,
        "history_path": "none", "budget": budget, "total": kept + overhead, "overhead": overhead,
        "sections": [
            {"tag": "task", "source": "task", "kept": kept // 2, "requested": kept // 2,
             "allotted": kept // 2, "rule": "kept"},
            {"tag": "history", "source": "session", "kept": kept - kept // 2,
             "requested": requested - kept // 2, "allotted": kept - kept // 2, "rule": "cut"},
        ],
    })  # fmt: skip


def test_a_small_context_fills_a_small_part_of_the_budget_bar() -> None:
    widths = _widths(mini_bar(_report(budget=10_000, kept=1_000, requested=1_000, overhead=100)))
    assert round(widths["kept"], 1) == 10.0  # 1,000 of a 10,000-token budget
    assert round(widths["overhead"], 1) == 1.0
    assert round(widths["free"], 1) == 89.0  # the unused budget is shown, not stretched away
    panel = _widths(budget_panel(_report(budget=10_000, kept=1_000, requested=1_000)))
    assert round(panel["kept"], 1) == 10.0 and round(panel["free"], 1) == 90.0


def test_a_context_cut_to_the_budget_fills_it_and_shows_what_was_cut() -> None:
    widths = _widths(mini_bar(_report(budget=1_000, kept=1_000, requested=3_000)))
    assert "free" not in widths
    assert round(widths["kept"] + widths["lost"], 1) == 100.0
    assert round(widths["kept"], 1) == round(100 * 1_000 / 3_000, 1)
