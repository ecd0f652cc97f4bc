"""The project's vision in every role's context, held to its share; the design's
per-section shares under pressure, within the designed truncation order.

A pinned section with a ``share`` (vision, 10%) is never dropped: when the context
does not fit whole and the vision is larger than its share, it is outlined to its
share and gets the rest back only from room every other section left. The other
shares are targets: sections are cut by priority, so a less important section never
keeps its target while a more important one is cut below its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _project_files import PROSE, sized_project
from personae.context import Budget, Snapshot, assemble_snapshot, load_profiles
from personae.context.report import SectionReport
from personae.context.snapshot import SnapshotOptions
from personae.team.turn_context import TurnContext
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
FLOOR = 40
"""Tokens a section at its smallest cut form may keep (notice and a few tokens)."""

TEAM_ROLES = ("manager", "worker", "client", "validator")


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return sized_project(tmp_path_factory.mktemp("shares"))


@pytest.fixture(scope="module")
def long_vision(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose VISION.md is about 2,500 tokens (headings and paragraphs)."""
    root = sized_project(tmp_path_factory.mktemp("long-vision"))
    parts = ["# Vision: a platform for short-form creators\n"]
    for i in range(34):
        parts.append(f"## Goal {i}\nCreators can do thing {i} well. " + PROSE * 4 + "\n")
    (root / ".personae" / "project" / "VISION.md").write_text("\n".join(parts), "utf-8")
    return root


def _rows(snap: Snapshot, role: str, budget: int) -> tuple[dict[str, SectionReport], str]:
    ctx = assemble_snapshot(snap, role, Budget.absolute(budget), COUNTER)
    assert ctx.total == COUNTER.count(ctx.render()) <= budget
    return {r.tag: r for r in ctx.report().sections}, ctx.render()


def test_every_role_shows_the_vision(project: Path) -> None:
    """The default manager, worker and validator (client) see the vision, like every
    fresh-context profile but the mapper and synthesizer (which read files directly)."""
    snap = Snapshot.build(project, task="profile-page")
    vision = (project / ".personae/project/VISION.md").read_text("utf-8")
    profiles = load_profiles(project)
    for role in profiles.roles:
        shows = any(s.source == "vision" for s in profiles.get(role).sections)
        if role in ("mapper", "synthesizer"):
            assert not shows, role
            continue
        assert shows, role
        rows, text = _rows(snap, role, 100_000)
        assert rows["vision"].rule == "pinned" or role == "deep_mapper", (role, rows["vision"])
        body = text.split("<vision>\n")[1].split("\n</vision>")[0]
        assert body.strip() == vision.strip(), role


def test_the_team_turn_gives_the_vision_to_all_three_roles(project: Path) -> None:
    """Through the team's own per-turn context, with and without a worker profile."""
    for profile in (None, "builder"):
        turn = TurnContext.build(
            project, SnapshotOptions(task="profile-page"), counter=COUNTER, profile=profile
        )
        for role in ("manager", "worker", "validator"):
            view = turn.view(role)  # type: ignore[arg-type]
            assert "<vision>\n# Vision\n\nBuild a platform" in view.text, (profile, role)
            row = {r.tag: r for r in view.report.sections}["vision"]
            assert row.rule == "pinned", (profile, role, row)


def test_a_long_vision_is_held_to_its_share_and_never_dropped(long_vision: Path) -> None:
    snap = Snapshot.build(long_vision, task="profile-page")
    whole = COUNTER.count((long_vision / ".personae/project/VISION.md").read_text("utf-8"))
    assert whole > 2000
    for role in (*TEAM_ROLES, "builder", "planner", "verifier"):
        need = assemble_snapshot(snap, role, Budget.absolute(10**6), COUNTER).total
        for budget in (4000, 8000, 12000):
            if budget >= need:
                continue
            rows, text = _rows(snap, role, budget)
            v = rows["vision"]
            share = budget // 10
            assert v.target == share and v.requested == whole
            assert v.rule == f"share {share}: outline", (role, budget, v)
            # Within its share, and filling it (the outline's start, headings first).
            cut = [r for r in rows.values() if r.rule.startswith("budget:")]
            assert share - FLOOR <= v.kept <= (share + FLOOR if cut else whole), (role, v)
            body = text.split("<vision>\n")[1].split("\n</vision>")[0]
            assert "# Vision: a platform for short-form creators" in body
            assert "## Goal 0\nCreators can do thing 0 well." in body  # headings, first lines
            assert "outlined" in body or "truncated to fit the budget" in body  # a notice
            # Named in the cut warning, so the reader knows to open the file.
            warning = text.split("<context_warning>\n")[1].split("\n</context_warning>")[0]
            assert "vision" in warning.split(":")[1], warning
            assert (budget - COUNTER.count(text)) / budget <= 0.05, (role, budget)


def test_a_long_vision_gets_room_left_over(long_vision: Path) -> None:
    """When everything else fits whole, the room left goes back to the vision."""
    snap = Snapshot.build(long_vision, task="profile-page")
    need = assemble_snapshot(snap, "interviewer", Budget.absolute(10**6), COUNTER).total
    rows, text = _rows(snap, "interviewer", need - 200)
    v = rows["vision"]
    assert v.kept > v.target  # type: ignore[operator]
    assert rows["instructions"].rule == "full"
    assert (need - 200 - COUNTER.count(text)) / (need - 200) <= 0.03
    rows, _ = _rows(snap, "interviewer", need)
    assert rows["vision"].rule == "pinned"


def test_the_step_is_never_held_to_its_target_while_reference_docs_keep_theirs(
    project: Path,
) -> None:
    """The complaint: at 2,000 tokens reference docs kept their 10% while the step was
    held to its 5%. By priority, git log and reference docs are at their floors before
    the step loses a token, and the step takes far more than its target."""
    snap = Snapshot.build(project, task="profile-page")
    rows, _ = _rows(snap, "builder", 2000)
    step, ref, log = rows["current_step"], rows["reference"], rows["recent_changes"]
    assert step.target == 100 and ref.target == 200 and log.target == 100
    # At 2,000 tokens the builder's codebase (kept while building, above the step)
    # takes the room; the step, reference docs and git log are at their floors.
    assert rows["codebase"].kept > 1000 and step.kept <= FLOOR, (rows["codebase"], step)
    assert ref.kept <= FLOOR and log.kept <= FLOOR, (ref, log)
    rows, _ = _rows(snap, "builder", 3000)
    step, ref, log = rows["current_step"], rows["reference"], rows["recent_changes"]
    assert step.rule.startswith("budget:") and step.kept > 3 * step.target, step  # type: ignore[operator]
    assert ref.kept <= FLOOR and log.kept <= FLOOR, (ref, log)
    # Over a range of budgets: no section keeps more than its target while a more
    # important section is below its own and cut.
    profiles = load_profiles(project)
    checked = 0
    for role in ("builder", "build", "planner", "verifier", "inspect", "syncer"):
        prio = {s.tag: s.priority for s in profiles.get(role).sections if not s.pinned}
        need = assemble_snapshot(snap, role, Budget.absolute(10**6), COUNTER).total
        for budget in range(1200, need, max(100, (need - 1200) // 20)):
            rows, _ = _rows(snap, role, budget)
            for hi in rows.values():
                if hi.tag not in prio or hi.target is None or not hi.rule.startswith("budget:"):
                    continue
                if hi.kept >= hi.target:
                    continue
                for lo in rows.values():
                    if lo.tag in prio and prio[lo.tag] < prio[hi.tag] and lo.rule != "absent":
                        assert lo.kept <= max(lo.target or 0, FLOOR), (role, budget, hi, lo)
                        checked += 1
    assert checked > 0
