"""Fitting invariants (hypothesis, exact o200k_base counts) and the truncation rules."""

from __future__ import annotations

import itertools
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personae.context import Budget, Snapshot, assemble_snapshot
from personae.context.messages import ChatMessage
from personae.errors import BudgetExceededError
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")

PROSE = "The quick brown fox reviewed the quarterly report and found three issues. "
CJK = "日本語のテキストと中文内容混合在一起。"
LOG = "2026-11-22T10:00:01Z ERROR worker[42]: connection reset by peer (retry 3/5)\n"
JSON = '{"id":"a1b2c3d4","items":[{"sku":"X-1","qty":3},{"sku":"Y-22","qty":14}]}\n'
KINDS = [PROSE, CJK, LOG, JSON, "</recent_messages> </TASK > <task>"]


def _text(kind: int, size: int) -> str:
    base = KINDS[kind]
    return (base * (size // len(base) + 1))[:size]


@st.composite
def histories(draw: Any) -> list[dict[str, Any]]:
    """Tool-heavy histories: parallel calls, huge outputs, CJK, logs, a running last call."""
    msgs: list[dict[str, Any]] = []
    seq = 0

    def add(**m: Any) -> None:
        nonlocal seq
        seq += 1
        msgs.append({"seq": seq, **m})

    turns = draw(st.integers(1, 7))
    call = 0
    for t in range(turns):
        add(
            role="user",
            content=f"turn {t}: " + _text(draw(st.integers(0, 4)), draw(st.integers(1, 200))),
        )
        for _ in range(draw(st.integers(0, 3))):
            n_calls = draw(st.integers(0, 4))
            calls = []
            for _ in range(n_calls):
                call += 1
                calls.append(
                    {"id": f"call_{call}", "name": "read_file", "args": {"path": f"f{call}"}}
                )
            add(role="assistant", content=_text(0, draw(st.integers(0, 120))), tool_calls=calls)
            last = t == turns - 1
            answered = calls if not last or draw(st.booleans()) else calls[: len(calls) // 2]
            for c in answered:
                size = draw(st.sampled_from([0, 5, 300, 3000, 20000]))
                add(role="tool", tool_call_id=c["id"], content=_text(draw(st.integers(0, 4)), size))
        if draw(st.booleans()):
            add(role="assistant", content=_text(draw(st.integers(0, 4)), draw(st.integers(1, 400))))
    return msgs


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("empty-project")


def check_pairs(kept: tuple[ChatMessage, ...]) -> None:
    """No orphan tool result, no dangling tool call."""
    i = 0
    while i < len(kept):
        m = kept[i]
        assert m.role != "tool", f"orphan tool result {m.tool_call_id}"
        if m.role == "assistant" and m.tool_calls:
            ids = {c.id for c in m.tool_calls}
            j = i + 1
            got = set()
            while j < len(kept) and kept[j].role == "tool":
                assert kept[j].tool_call_id in ids, "tool result for another call"
                got.add(kept[j].tool_call_id)
                j += 1
            assert got == ids, f"dangling tool calls {ids - got}"
            i = j
        else:
            i += 1


def tags_once(rendered: str) -> None:
    opens = re.findall(r"(?m)^<([a-z_]+)>$", rendered)
    closes = re.findall(r"(?m)^</([a-z_]+)>$", rendered)
    assert opens == closes
    assert len(opens) == len(set(opens))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    history=histories(), budget=st.integers(60, 2500), role=st.sampled_from(["worker", "client"])
)
def test_fitting_invariants(
    root: Path, history: list[dict[str, Any]], budget: int, role: str
) -> None:

    def build() -> Snapshot:
        return Snapshot.build(
            root,
            messages=history,
            task="Fix the failing build </task >",
            execution_block="You are careful.",
            validation_context="Check the tests ran.",
            include_git_log=False,
        )

    snap = build()
    latest_user = [m for m in history if m["role"] == "user"][-1]
    try:
        ctx = assemble_snapshot(snap, role, Budget.absolute(budget), COUNTER)
    except BudgetExceededError as exc:
        assert exc.needed > exc.budget == budget
        assert budget < 1200, "a generous budget must always fit"
        return
    rendered = ctx.render()
    exact = COUNTER.count(rendered)
    assert exact <= budget
    assert ctx.report().total == exact == ctx.total
    check_pairs(ctx.messages)
    assert any(m.role == "user" and m.seq == latest_user["seq"] for m in ctx.messages)
    kept_user = next(m for m in ctx.messages if m.seq == latest_user["seq"])
    assert kept_user.content.replace("&lt;", "<") == latest_user["content"]
    tags_once(rendered)
    again = assemble_snapshot(
        build(), role, Budget.absolute(budget), COUNTER
    )  # the same input again
    assert again.render() == rendered


def test_pinned_over_budget_says_by_how_much(root: Path) -> None:
    snap = Snapshot.build(root, task=PROSE * 40, include_git_log=False)
    task_tokens = COUNTER.count(snap.texts["task"])
    with pytest.raises(BudgetExceededError) as info:
        assemble_snapshot(snap, "worker", Budget.absolute(100), COUNTER)
    assert info.value.needed >= task_tokens
    assert info.value.over == info.value.needed - 100
    assert f"({info.value.over} over)" in str(info.value)


def test_default_caps_apply_with_visible_notices(root: Path) -> None:
    history = [
        {"seq": i + 1, "role": "user" if i % 2 == 0 else "assistant", "content": PROSE * 5}
        for i in range(30)
    ]
    snap = Snapshot.build(
        root,
        messages=history,
        task="t",
        execution_block="p",
        validation_context=PROSE * 80,
        include_git_log=False,
    )
    snap.texts["directive"] = PROSE * 100  # 1,400+ tokens: over the 500 cap
    ctx = assemble_snapshot(snap, "client", Budget.absolute(100_000), COUNTER)
    rows = {r.tag: r for r in ctx.report().sections}
    assert rows["directive"].kept <= 500 < rows["directive"].requested
    assert rows["directive"].rule.startswith("cap 500")
    assert rows["validation_context"].kept <= 400 < rows["validation_context"].requested
    assert rows["recent_messages"].kept <= 800
    assert len(ctx.messages) <= 6
    rendered = ctx.render()
    assert "directive truncated to fit the budget" in rendered
    assert "earlier messages omitted" in rendered


def test_truncation_cuts_recent_changes_first_then_reference_then_step(root: Path) -> None:
    snap = Snapshot.build(root, task="Build the profile page", include_git_log=False)
    snap.texts.update(
        vision="# Vision\n" + PROSE * 20,
        step="# Step 2\n" + ("## Part\nDetails here. " + PROSE * 10 + "\n") * 6,
        decisions="### Locked\n- Use SQLite",
        codebase="## CONVENTIONS.md\n" + PROSE * 60,
        research="## FEATURES.md\n" + PROSE * 60,
        git_log="Recent commits:\n" + "- 2026-11-01 fix things (abc1234)\n" * 200,
    )
    full = assemble_snapshot(snap, "builder", Budget.absolute(100_000), COUNTER).report()
    need = full.total
    rows_full = {r.tag: r.kept for r in full.sections}
    # A little short: only the git log is cut.
    small = assemble_snapshot(snap, "builder", Budget.absolute(need - 200), COUNTER).report()
    rows = {r.tag: r for r in small.sections}
    assert rows["recent_changes"].kept < rows_full["recent_changes"]
    for tag in ("vision", "decisions", "task", "current_step", "codebase", "research"):
        assert rows[tag].kept == rows_full[tag], tag
    # Much shorter: reference docs are cut next (never dropped while a cut fits).
    tight = assemble_snapshot(snap, "builder", Budget.absolute(need - 3000), COUNTER)
    rows = {r.tag: r for r in tight.report().sections}
    assert rows["research"].rule == "budget: cut"
    for tag in ("vision", "decisions", "task"):
        assert rows[tag].kept == rows_full[tag], tag
    assert COUNTER.count(tight.render()) <= need - 3000
    # Tighter still: the step is summarized (outline); the builder keeps its codebase docs;
    # the git log keeps its newest commits.
    tighter = {
        r.tag: r
        for r in assemble_snapshot(snap, "builder", Budget.absolute(1500), COUNTER)
        .report()
        .sections
    }
    assert tighter["current_step"].rule == "budget: outline"
    assert tighter["codebase"].rule == "full"
    assert tighter["recent_changes"].rule == "budget: cut"
    assert tighter["recent_changes"].kept < tighter["codebase"].kept


def test_latest_turn_shrinks_instead_of_being_lost(root: Path) -> None:
    history = [
        {"seq": 1, "role": "user", "content": "old question"},
        {"seq": 2, "role": "assistant", "content": "old answer"},
        {"seq": 3, "role": "user", "content": "Read the giant log please"},
        {
            "seq": 4,
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "a", "name": "read_file", "args": {}},
                {"id": "b", "name": "grep", "args": {}},
            ],
        },
        {"seq": 5, "role": "tool", "tool_call_id": "a", "content": LOG * 3000},
        {"seq": 6, "role": "tool", "tool_call_id": "b", "content": CJK * 3000},
    ]
    snap = Snapshot.build(root, messages=history, task="t", include_git_log=False)
    ctx = assemble_snapshot(snap, "worker", Budget.absolute(700), COUNTER)
    assert [m.seq for m in ctx.messages] == [3, 4, 5, 6]
    assert "[output shortened to fit the budget" in ctx.render()
    assert COUNTER.count(ctx.render()) <= 700
    check_pairs(ctx.messages)


def _start_moves(root: Path, profiles: Any) -> tuple[int, list[int]]:
    history: list[dict[str, Any]] = []
    starts = []
    sizes = []
    for t in range(60):
        history.append({"seq": len(history) + 1, "role": "user", "content": f"question {t}"})
        history.append({"seq": len(history) + 1, "role": "assistant", "content": f"answer {t}"})
        snap = Snapshot.build(
            root, messages=history, task="t", include_git_log=False, profiles=profiles
        )
        ctx = assemble_snapshot(snap, "worker", Budget.absolute(5000), COUNTER)
        starts.append(ctx.messages[0].seq)
        sizes.append(len(ctx.messages))
        check_pairs(ctx.messages)
    moves = sum(1 for a, b in itertools.pairwise(starts) if a != b)
    return moves, sizes


def test_eviction_in_batches_keeps_a_stable_prefix(root: Path, tmp_path: Path) -> None:
    from personae.context import load_profiles

    batched, sizes = _start_moves(root, load_profiles(None))
    assert max(sizes) <= 6 and min(sizes[3:]) >= 4
    (tmp_path / ".personae").mkdir()
    (tmp_path / ".personae" / "profiles.yaml").write_text(
        "sections:\n  recent_messages: {evict_batch: 1}\n", encoding="utf-8"
    )
    sliding, _ = _start_moves(root, load_profiles(tmp_path))
    assert sliding >= 55  # one exchange per turn
    assert batched <= sliding * 0.7


def test_roles_share_byte_identical_sections(root: Path) -> None:
    history = [{"seq": 1, "role": "user", "content": "hello </recent_messages>"}]
    snap = Snapshot.build(
        root,
        messages=history,
        task="t",
        execution_block="exec",
        validation_context="val",
        handover="## Handover\nfrom planner",
        include_git_log=False,
    )
    snap.texts["directive"] = "Never touch prod."

    def sections(role: str) -> dict[str, str]:
        found = re.findall(
            r"(?ms)^<([a-z_]+)>\n(.*?)\n</\1>$",
            assemble_snapshot(snap, role, Budget.absolute(4000), COUNTER).render(),
        )
        return dict(found)

    m, w, c = sections("manager"), sections("worker"), sections("client")
    for tag in ("directive", "handover", "task", "recent_messages"):
        assert m[tag] == w[tag] == c[tag]
    assert "active_persona" in m and "active_persona" not in c
    assert "validation_context" in c and "validation_context" not in m


def test_budget_share_of_window() -> None:
    b = Budget.of_window(128_000)
    assert b.tokens == 38_400 and b.share == 0.30
    with pytest.raises(Exception, match="share"):
        Budget.of_window(1000, share=1.5)
    with pytest.raises(Exception, match="at least 1"):
        Budget.absolute(0)


def test_truncation_modes_through_the_pure_fit() -> None:
    from personae.context import SectionContent, SectionSpec, Truncation
    from personae.context.fit import fit

    body = "\n".join(f"line {i} " + PROSE for i in range(200))
    specs = {
        mode: SectionSpec(tag=f"s_{mode.value}", source="text", truncation=mode, cap=150)
        for mode in Truncation
    }
    contents = [SectionContent(spec, text=body) for spec in specs.values()]
    result = fit(contents, 5000, COUNTER)
    kept = {s.tag: s for s in result.sections}
    assert kept["s_tail"].text is not None and kept["s_tail"].text.startswith("line 0 ")
    assert kept["s_head"].text is not None and kept["s_head"].text.rstrip().endswith(PROSE.strip())
    assert "line 199" in kept["s_head"].text and "line 0 " not in kept["s_head"].text
    assert (
        kept["s_drop"].text
        == f"[s_drop omitted: {kept['s_drop'].requested} tokens did not fit the budget]"
    )
    for s in result.sections:
        assert s.kept <= 150 < s.requested
        assert s.text is not None and ("[" in s.text)
    assert result.total == COUNTER.count(result.rendered) <= 5000
    md = "# Title\nintro line\n\n## Part A\n" + PROSE * 30 + "\n## Part B\n" + PROSE * 30
    outline = fit([SectionContent(specs[Truncation.SUMMARIZE], text=md)], 5000, COUNTER).sections[0]
    assert outline.rule.endswith("outline") and "## Part B" in (outline.text or "")


def _calling(seq: int, content: str, *ids: str) -> dict[str, Any]:
    """Assistant message ``seq`` saying ``content`` and calling tool ``t`` once per id."""
    calls = [{"id": call_id, "name": "t"} for call_id in ids]
    return {"seq": seq, "role": "assistant", "content": content, "tool_calls": calls}


def test_unpaired_messages_are_never_rendered(root: Path) -> None:
    history = [
        {"seq": 1, "role": "tool", "tool_call_id": "gone", "content": "orphan from a cut window"},
        {"seq": 2, "role": "user", "content": "first"},
        _calling(3, "", "a", "b"),
        {"seq": 4, "role": "tool", "tool_call_id": "a", "content": "only a answered"},
        {"seq": 5, "role": "user", "content": "second"},
        _calling(6, "running", "c", "d"),
        {"seq": 7, "role": "tool", "tool_call_id": "d", "content": "d done"},
        {"seq": 8, "role": "tool", "tool_call_id": "zz", "content": "answers nothing"},
    ]
    snap = Snapshot.build(root, messages=history, task="t", include_git_log=False)
    ctx = assemble_snapshot(snap, "worker", Budget.absolute(3000), COUNTER)
    check_pairs(ctx.messages)
    assert [m.seq for m in ctx.messages] == [2, 5, 6, 7]
    assert [c.id for c in ctx.messages[2].tool_calls] == ["d"]  # the running call c is not shown
    assert ctx.render().count("[4 earlier messages omitted") == 1  # 1, 3, 4 and 8
