"""The designed truncation order, in every profile: lower priority is cut first.

Git log first, reference docs second, step context third (as an outline); task,
vision and decisions never (a vision over its share of the budget is held to its
share, outlined, and never dropped). For deep context the summary file stands in for the
specifics first, and research goes before codebase, except research while
planning and codebase while building.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from _project_files import sized_project
from personae.context import Budget, Snapshot, assemble_snapshot, load_profiles
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
FLOOR = 40
"""Tokens a section at its smallest cut form may keep (notice and a few tokens)."""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sized_project(tmp_path_factory.mktemp("order"))


def _priorities(project: Path, role: str) -> dict[str, tuple[int, bool]]:
    profile = load_profiles(project).get(role)
    return {s.tag: (s.priority, s.pinned) for s in profile.sections}


def test_lower_priority_is_cut_first_in_every_profile(project: Path) -> None:
    snap = Snapshot.build(project, task="profile-page")
    rng = random.Random(29)
    checked = held = 0
    for role in load_profiles(project).roles:
        prio = _priorities(project, role)
        need = assemble_snapshot(snap, role, Budget.absolute(10**6), COUNTER).total
        if need <= 500:
            continue
        for _ in range(25):
            budget = rng.randint(500, need - 1)
            ctx = assemble_snapshot(snap, role, Budget.absolute(budget), COUNTER)
            assert ctx.total == COUNTER.count(ctx.render()) <= budget
            rows = [r for r in ctx.report().sections if r.tag != "context_warning"]
            cut = [r for r in rows if r.rule.startswith("budget:") and not prio[r.tag][1]]
            for r in rows:
                if prio[r.tag][1] and r.rule.startswith("share "):
                    # Pinned with a share (vision): held to its share, never dropped;
                    # above it only by room the cut sections' coarser forms left over.
                    assert r.target is not None and r.requested > r.target, (role, r)
                    assert r.kept > 0, (role, budget, r)
                    assert r.kept <= r.target + FLOOR or not cut, (role, budget, r)
                    held += 1
                elif prio[r.tag][1]:
                    assert r.rule in ("pinned", "absent"), (role, r)
            for b in cut:
                for a in rows:
                    if a.rule == "absent" or prio[a.tag][1] or prio[a.tag][0] >= prio[b.tag][0]:
                        continue
                    # ``a`` is cut before ``b``: at its floor, give or take the room
                    # ``b``'s coarser forms left over.
                    assert a.kept <= FLOOR + 0.05 * budget, (role, budget, b.tag, a)
                    checked += 1
    assert checked > 100
    assert held > 0  # the sized project's vision is over its share at small budgets


def test_designed_order_of_the_builder_and_the_planner(project: Path) -> None:
    builder = _priorities(project, "builder")
    order = ["recent_changes", "reference", "current_step"]
    assert [builder[t][0] for t in order] == sorted(builder[t][0] for t in order)
    assert builder["research"][0] < builder["codebase"][0]  # research before codebase
    assert builder["codebase"][0] > builder["current_step"][0]  # codebase while building
    assert all(builder[t][1] for t in ("vision", "decisions", "task"))
    planner = _priorities(project, "planner")
    assert planner["research_summary"][0] > planner["recent_changes"][0]
    assert planner["research_summary"][0] > planner["codebase_summary"][0]  # while planning


def test_summary_first_then_specifics(project: Path) -> None:
    """A research folder cut by the budget shows its summary file first, and the room
    the summary freed is filled with the start of the specifics, never left unused."""
    snap = Snapshot.build(project, task="profile-page")
    for role in ("brainstorm", "pivot"):
        need = assemble_snapshot(snap, role, Budget.absolute(10**6), COUNTER).total
        for budget in (need - 100, need - 300, (need + 600) // 2):
            ctx = assemble_snapshot(snap, role, Budget.absolute(budget), COUNTER)
            row = {r.tag: r for r in ctx.report().sections}["research"]
            assert row.rule == "budget: summary file", row
            text = ctx.render().split("<research>\n")[1].split("\n</research>")[0]
            assert text.startswith("## SUMMARY.md") or "Research" in text.split("\n")[1]
            assert "truncated to fit the budget" in text
            assert row.kept < row.requested
            assert (budget - ctx.total) / budget <= 0.03, (role, budget, ctx.total)
