"""A stored model call's budget is read back as a model, in one place.

The viewer's bars and the OpenTelemetry export read ``read_stored_budget``'s
``BudgetReport | SubagentBrief | None``; a row an older version stored in another form
is shown as "not recorded in this form", never a crash, and no module reads the
stored JSON's sections as dicts again.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from personae.context.report import BudgetReport, SubagentBrief, read_stored_budget
from personae.store.db import Store
from personae.store.runs import RunStore
from personae.telemetry.otel import export_run
from personae.ui.budget import NOT_RECORDED, budget_panel, mini_bar, section_blocks
from personae.ui.data import Reader
from personae.ui.pages import call_page

SRC = Path(__file__).resolve().parents[1] / "src" / "personae"

REPORT: dict[str, Any] = {
    "role": "worker", "snapshot_id": "s1", "counter": "chars", "counter_exact": False,
    "history_path": "none", "budget": 100, "window": 400, "share": 0.25, "total": 30,
    "overhead": 4,
    "sections": [
        {"tag": "task", "source": "task", "requested": 16, "allotted": 16, "kept": 16,
         "rule": "pinned"},
        {"tag": "history", "source": "session", "requested": 40, "allotted": 10, "kept": 10,
         "rule": "cut"},
    ],
}  # fmt: skip
# What an older version stored: the numbers without the report's identity fields.
OLD_ROW: dict[str, Any] = {
    "budget": 100, "total": 20, "overhead": 4,
    "sections": [{"tag": "task", "kept": 16, "requested": 16, "rule": "pinned"}],
}  # fmt: skip
BRIEF: dict[str, Any] = {"context_mode": "isolated", "depth": 1, "tokens": 42, "counter": "c"}


def test_the_reader_gives_the_model_or_none() -> None:
    report = read_stored_budget(REPORT)
    assert isinstance(report, BudgetReport) and report.sections[1].rule == "cut"
    assert report.model_dump(mode="json") == BudgetReport.model_validate(REPORT).model_dump(
        mode="json"
    )
    assert read_stored_budget(BRIEF) == SubagentBrief(**BRIEF)
    unknown_mode = {**BRIEF, "context_mode": "task_only"}  # not a ContextMode
    for unreadable in (None, {}, OLD_ROW, {**REPORT, "sections": "task"}, {"context_mode": 3},
                       unknown_mode):  # fmt: skip
        assert read_stored_budget(unreadable) is None, unreadable


def test_a_report_is_drawn_from_the_model() -> None:
    report = read_stored_budget(REPORT)
    panel = budget_panel(report)
    assert "context 30 of 100 tokens used (25% of a 400-token window)" in panel
    assert 'data-tag="history" data-state="cut"' in panel
    assert '<td class="num">40</td>' in panel and NOT_RECORDED not in panel
    assert "context 30 of 100 tokens" in mini_bar(report)
    blocks = section_blocks("intro\n<task>\ndo it\n</task>\n", report)
    assert "&lt;task&gt;</code> 16 tokens" in blocks
    brief = read_stored_budget(BRIEF)
    assert "context 42 tokens · context mode isolated" in mini_bar(brief)
    assert "<dt>context mode</dt><dd>isolated</dd>" in budget_panel(brief)


def test_an_old_row_is_shown_as_not_recorded_not_a_crash(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    with Store(root / ".personae" / "state.db") as store:
        runs = RunStore(store)
        rid = runs.create(task="t", model="scripted:x", persona="p")
        for budget in (OLD_ROW, REPORT):
            runs.add_model_call(rid, role="worker", model="scripted:x",
                                context_text="<task>\nt\n</task>", budget=budget,
                                usage={"input_tokens": 20, "output_tokens": 3})  # fmt: skip
        runs.finish(rid, status="done", final_text="ok", usage={})

    view = Reader(root).run(rid)
    old, new = call_page(view, 1), call_page(view, 2)
    assert NOT_RECORDED in old and 'aria-label="sections"' not in old
    assert NOT_RECORDED not in new and 'aria-label="sections"' in new

    exporter = InMemorySpanExporter()
    export_run(root / ".personae" / "state.db", rid, exporter=exporter)
    chats = sorted(
        (s for s in exporter.get_finished_spans() if s.attributes
         and s.attributes.get("gen_ai.operation.name") == "chat"),
        key=lambda s: s.attributes["personae.model_call.seq"] if s.attributes else 0,
    )  # fmt: skip
    assert len(chats) == 2
    old_attrs, new_attrs = dict(chats[0].attributes or {}), dict(chats[1].attributes or {})
    assert not any(k.startswith(("personae.budget.", "personae.section.")) for k in old_attrs)
    assert new_attrs["personae.budget.total"] == 30
    assert new_attrs["personae.section.history.requested"] == 40
    assert new_attrs["personae.budget.sections"] == ("task=16/16 pinned", "history=10/40 cut")


def test_no_module_reads_a_stored_budget_as_a_dict() -> None:
    """The budget column is read by ``read_stored_budget`` only: a ``.get("sections")`` or
    ``["sections"]`` anywhere in the package is a dict-reading path come back.

    A profile file's ``[sections]`` tables are not a budget (``context/profiles.py``)."""
    pattern = re.compile(r"""\.get\(\s*["']sections["']|\[\s*["']sections["']\s*\]""")
    readers = [
        f"{path.relative_to(SRC)}:{n}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    others = ("context/profiles.py:",)
    assert [r for r in readers if not r.startswith(others)] == []
