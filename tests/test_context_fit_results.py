"""The results of an assembly (sections, fit result, assembled context, contents) are
built by filling their fields directly (a frozen dataclass's ``__init__`` is several
times the cost): they must be the very objects the constructors build, and stay
frozen."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any

import pytest

from _helpers import HISTORY_TEXTS, with_oversized_turn
from personae.context import Budget, ChatMessage, Snapshot, assemble_snapshot, load_profiles
from personae.context import assemble as assemble_mod
from personae.context import fit as fit_mod
from personae.context._filled import filled
from personae.context.assemble import WARNING_TAG, AssembledContext
from personae.context.fit import (
    Draft,
    FitResult,
    FittedSection,
    SectionContent,
    known_cuts,
)
from personae.context.messages import ChatToolCall
from personae.context.spec import SectionSource, SectionSpec
from personae.errors import BudgetExceededError
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
PROFILE = (
    "roles:\n  agent:\n    sections:\n      - task\n      - {tag: notes, source: text,"
    " text: 'Read the notes first.', share: 0.1}\n"
    "      - {tag: recent_messages, cap: 1000000, max_messages: 1000000}\n"
)


def _history(rng: random.Random, turns: int) -> list[ChatMessage]:
    msgs: list[ChatMessage] = []
    for turn in range(turns):
        msgs.append(ChatMessage("user", f"turn {turn}: " + rng.choice(HISTORY_TEXTS)[:300],
                                seq=len(msgs) + 1))  # fmt: skip
        call = ChatToolCall(f"c{turn}", "read", "{}")
        msgs.append(ChatMessage("assistant", "reading", tool_calls=(call,), seq=len(msgs) + 1))
        msgs.append(ChatMessage("tool", rng.choice(HISTORY_TEXTS) * 3, tool_call_id=f"c{turn}",
                                seq=len(msgs) + 1))  # fmt: skip
    return msgs


def _same_as_built(obj: Any) -> None:
    """``obj`` has exactly its class's fields and equals the one its constructor builds."""
    cls = type(obj)
    names = [f.name for f in dataclasses.fields(cls)]
    assert sorted(vars(obj)) == sorted(names), cls
    built = cls(**{name: getattr(obj, name) for name in names})
    assert built == obj and repr(built) == repr(obj)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(obj, names[0], None)


def test_assembled_results_are_the_objects_their_constructors_build(tmp_path: Path) -> None:
    """Over budgets where everything fits, where the conversation is evicted, and where
    its latest turn is shrunk and a warning is added."""
    (tmp_path / ".personae").mkdir()
    (tmp_path / ".personae" / "profiles.yaml").write_text(PROFILE, encoding="utf-8")
    msgs = _history(random.Random(29), 12)
    snap = Snapshot.build(
        tmp_path, messages=msgs, task="Fix the bug", include_git_log=False,
        profiles=load_profiles(tmp_path),
    )  # fmt: skip
    warned = set()
    for budget in (300, 600, 1500, 3000, 6000, 100_000):
        ctx = assemble_snapshot(snap, "agent", Budget.absolute(budget), COUNTER)
        assert isinstance(ctx, AssembledContext)
        _same_as_built(ctx)
        assert ctx.sections
        for section in ctx.sections:
            assert isinstance(section, FittedSection)
            _same_as_built(section)
            joined = None if section.pieces is None else "\n\n".join(section.pieces)
            assert section.text == joined
        assert ctx.total == COUNTER.count(ctx.render()) <= budget
        warned.add(WARNING_TAG in [s.tag for s in ctx.sections])
    assert warned == {True, False}


def test_filled_gives_what_the_constructor_gives() -> None:
    spec = SectionSpec(tag="task", source=SectionSource.TASK)
    got = filled(
        SectionContent, spec=spec, text="x", units=(), costs=(), earlier=0, tokens=1,
        alternative=None, alt_tokens=None, keep_from=None, exchanges=None,
    )  # fmt: skip
    _same_as_built(got)
    assert got == SectionContent(spec, text="x", tokens=1)
    result = filled(FitResult, sections=(), rendered="", total=0, refits=0)
    _same_as_built(result)
    assert hash(result) == hash(FitResult(sections=(), rendered="", total=0))


def _contents(
    rng: random.Random,
    pinned: list[SectionSpec],
    others: list[SectionSpec],
    cap: int | None,
    output: int = 8,
) -> list[SectionContent]:
    """Pinned and other text sections around a conversation whose latest turn has one
    tool output of ``output`` times a history text."""
    msgs = _history(rng, 6)
    ex = with_oversized_turn(msgs, HISTORY_TEXTS[0] * output, COUNTER)
    history = SectionSpec(tag="recent_messages", source=SectionSource.MESSAGES, cap=cap)
    texts = [
        SectionContent(spec, text=HISTORY_TEXTS[k % len(HISTORY_TEXTS)][: 200 + 150 * k])
        for k, spec in enumerate([*pinned, *others])
    ]
    conversation = SectionContent(history, units=ex.units, costs=ex.costs, exchanges=ex)
    empty = SectionContent(SectionSpec(tag="empty", source=SectionSource.TEXT))
    return [*texts[:1], conversation, *texts[1:], empty]


VISION = SectionSpec(tag="vision", source=SectionSource.TEXT, pinned=True, share=0.1)
PINNED = [
    SectionSpec(tag="task", source=SectionSource.TEXT, pinned=True),
    SectionSpec(tag="rules", source=SectionSource.TEXT, pinned=True),
]


@pytest.mark.parametrize(
    ("pinned", "others", "cap", "known"),
    [
        (PINNED, [], None, True),
        (PINNED[:1], [], 100_000, True),
        (PINNED, [], 900, True),  # known at budgets up to its cap only
        ([VISION], [], None, False),
        (PINNED, [SectionSpec(tag="notes", source=SectionSource.TEXT, priority=70)], None, False),
    ],
)
def test_known_cuts_are_those_an_outcomes_only_draft_names(
    monkeypatch: pytest.MonkeyPatch,
    pinned: list[SectionSpec],
    others: list[SectionSpec],
    cap: int | None,
    known: bool,
) -> None:
    """Where the conversation is over the budget beside pinned sections only, the
    first fitting of an assembly is skipped: what it names is known. The assembly's
    result (or its error) is the one with that fitting done."""
    rng = random.Random(len(pinned) * 7 + len(others) + (cap or 0))
    contents = _contents(rng, pinned, others, cap)
    seen = {"known": 0, "raised": 0}
    for budget in sorted({rng.randint(20, 4000) for _ in range(40)} | {60, 120, 240, 2400}):
        got = known_cuts(contents, budget)
        try:
            named = assemble_mod._cut_tags(Draft(contents, budget, COUNTER, outcomes_only=True)
                                           .outcomes())  # fmt: skip
        except BudgetExceededError:
            named = None
        if got is not None:
            seen["known"] += 1
            assert cap is None or budget <= cap  # a cap under the budget bounds it first
            assert named is None or got == named, budget
        fast = slow = None
        try:
            fast = assemble_mod._fit_with_warning(contents, budget, COUNTER)
        except BudgetExceededError as exc:
            fast_error = str(exc)
        with monkeypatch.context() as m:
            m.setattr(assemble_mod, "known_cuts", lambda *_: None)
            try:
                slow = assemble_mod._fit_with_warning(contents, budget, COUNTER)
            except BudgetExceededError as exc:
                assert fast is None and fast_error == str(exc), budget
                seen["raised"] += 1
                continue
        assert fast == slow, budget
    assert bool(seen["known"]) is known
    if known:
        assert seen["raised"]  # the budgets reach below pinned content and the turn's floor


@pytest.mark.parametrize(
    ("pinned", "others", "cap", "applies"),
    [
        (PINNED, [], None, True),
        (PINNED, [SectionSpec(tag="notes", source=SectionSource.TEXT, priority=70)], None, True),
        # Lower in priority than the conversation: the notes are cut first (the passes).
        (PINNED, [SectionSpec(tag="notes", source=SectionSource.TEXT, priority=20)], None, False),
        # Over its cap: the notes are cut to it first (the passes).
        (PINNED[:1], [SectionSpec(tag="notes", source=SectionSource.TEXT, cap=60)], None, False),
        # A pinned share is held to it (the passes).
        ([VISION], [SectionSpec(tag="notes", source=SectionSource.TEXT, priority=90)], None, False),
    ],
)
def test_a_conversation_over_the_budget_takes_the_rest_as_the_passes_give_it(
    monkeypatch: pytest.MonkeyPatch,
    pinned: list[SectionSpec],
    others: list[SectionSpec],
    cap: int | None,
    applies: bool,
) -> None:
    """A conversation whose latest turn alone is over the budget is fitted in one go
    into the room the other sections leave whole when that is what the passes give (it
    is the lowest in priority, the others fit whole, no pinned share); the fitting is
    the same with the passes run every time, error or result, at every budget."""
    rng = random.Random(len(pinned) * 11 + len(others) * 3 + (cap or 0))
    contents = _contents(rng, pinned, others, cap, output=80)
    real = fit_mod._over_takes_rest
    took = []

    def counted(plan: Any, counter: Any) -> bool:
        took.append(real(plan, counter))
        return took[-1]

    for budget in sorted({rng.randint(20, 5000) for _ in range(50)} | {60, 300, 2400}):
        with monkeypatch.context() as m:
            m.setattr(fit_mod, "_over_takes_rest", counted)
            try:
                fast: FitResult | str = Draft(contents, budget, COUNTER).result()
            except BudgetExceededError as exc:
                fast = str(exc)
        with monkeypatch.context() as m:
            m.setattr(fit_mod, "_over_takes_rest", lambda *_: False)
            try:
                slow: FitResult | str = Draft(contents, budget, COUNTER).result()
            except BudgetExceededError as exc:
                slow = str(exc)
        assert fast == slow, budget
    assert any(took) is applies, took


def test_fresh_snapshots_assemble_their_own_texts_and_messages(tmp_path: Path) -> None:
    """Fresh snapshots of one conversation reuse the contents an earlier assembly
    prepared only while the messages and texts are the same: a new task, a message more
    and an edited message each show in the next assembly, equal copies of the messages
    do not change it, and going back shows the first prompt again byte for byte."""
    (tmp_path / ".personae").mkdir()
    (tmp_path / ".personae" / "profiles.yaml").write_text(PROFILE, encoding="utf-8")
    profiles = load_profiles(tmp_path)
    msgs = _history(random.Random(31), 8)

    def prompt(task: str, messages: list[ChatMessage]) -> str:
        snap = Snapshot.build(
            tmp_path, messages=messages, task=task, include_git_log=False, profiles=profiles
        )
        return assemble_snapshot(snap, "agent", Budget.absolute(50_000), COUNTER).render()

    first = prompt("Fix the parser", msgs)
    assert "Fix the parser" in first and prompt("Fix the parser", msgs) == first
    other = prompt("Write the docs", msgs)
    assert "Write the docs" in other and "Fix the parser" not in other
    more = [*msgs, ChatMessage("user", "and the tests too", seq=len(msgs) + 1)]
    assert "and the tests too" in prompt("Write the docs", more)
    assert prompt("Fix the parser", msgs) == first
    # Equal copies of the messages are the same conversation; an edited one is not.
    assert prompt("Fix the parser", [dataclasses.replace(m) for m in msgs]) == first
    edited = list(msgs)
    edited[4] = dataclasses.replace(edited[4], content="an edited message")
    assert "an edited message" in prompt("Fix the parser", edited)
    assert prompt("Fix the parser", msgs) == first
