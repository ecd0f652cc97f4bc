"""Stateless assembly: a fresh snapshot per prompt (a server assembling per request).

- Its cut points come from the history alone (a grid of token positions), so a
  growing conversation keeps its prompt prefix turn after turn with no state kept,
  and the budget stays used (less than one grid step unused).
- What the process prepared for earlier conversations (messages, exchanges,
  digest, project files) is reused by content: the prompt is byte-identical to one
  prepared from nothing.
- Cuts of huge outputs are verified by counting only the text after the last
  boundary the pre-tokenizer always splits at: exactly the count of the whole.
"""

from __future__ import annotations

import bisect
import gc
import itertools
import random
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path

import pytest

from _helpers import HISTORY_TEXTS, with_oversized_turn
from personae.context import (
    Budget,
    ChatMessage,
    ContextWindow,
    Snapshot,
    assemble_snapshot,
    load_profiles,
)
from personae.context import _counted as _counted_mod
from personae.context import _fresh as fresh_mod
from personae.context import _pieces as _pieces_mod
from personae.context import _textcut as _textcut_mod
from personae.context import _turnshrink as turnshrink_mod
from personae.context import fit as fit_mod
from personae.context import history as history_mod
from personae.context import snapshot as snapshot_mod
from personae.context import window as window_mod
from personae.context._pieces import starts_piece as _starts_piece
from personae.context._textcut import (
    _head_count,
    _starts_of,
    _tail_count,
    _token_starts,
    count_followed,
    cut_text,
)
from personae.context.messages import ChatToolCall
from personae.tokens.exact import exact_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _prefix import common_prefix_length

COUNTER = exact_counter("o200k_base")
TEXTS = HISTORY_TEXTS
PROFILE = (
    "roles:\n  agent:\n    sections:\n      - task\n"
    "      - {tag: recent_messages, cap: 1000000, max_messages: 1000000}\n"
)


def _loop(rng: random.Random, turns: int) -> list[list[ChatMessage]]:
    """The history at each prompt of an agent loop (one prompt per user message and
    one after each step's results)."""
    msgs: list[ChatMessage] = []
    out: list[list[ChatMessage]] = []
    for turn in range(turns):
        msgs.append(
            ChatMessage("user", f"turn {turn}: " + rng.choice(TEXTS)[:300], seq=len(msgs) + 1)
        )
        out.append(list(msgs))
        for _ in range(rng.randint(0, 2)):
            ids = [f"t{turn}c{k}{len(msgs)}" for k in range(rng.randint(1, 2))]
            calls = tuple(ChatToolCall(i, "read", "{}") for i in ids)
            msgs.append(ChatMessage("assistant", "reading", tool_calls=calls, seq=len(msgs) + 1))
            for i in ids:
                content = rng.choice(TEXTS) * rng.randint(1, 2)
                msgs.append(ChatMessage("tool", content, tool_call_id=i, seq=len(msgs) + 1))
            out.append(list(msgs))
        msgs.append(ChatMessage("assistant", rng.choice(TEXTS)[:200], seq=len(msgs) + 1))
    return out


def _project(root: Path, extra: str = "") -> Path:
    (root / ".personae").mkdir(parents=True, exist_ok=True)
    (root / ".personae" / "profiles.yaml").write_text(
        PROFILE.replace("1000000}", f"1000000{extra}}}"), encoding="utf-8"
    )
    return root


def _shares(root: Path, budget: int) -> tuple[list[float], list[float]]:
    profiles = load_profiles(root)
    renders: list[str] = []
    unused: list[float] = []
    for now in _loop(random.Random(29), 120):
        snap = Snapshot.build(
            root, messages=now, task="t", include_git_log=False, profiles=profiles
        )
        ctx = assemble_snapshot(snap, "agent", Budget.absolute(budget), COUNTER)
        assert COUNTER.count(ctx.render()) == ctx.total <= budget
        latest = max(m.seq for m in now if m.role == "user")
        assert latest in {m.seq for m in ctx.messages}
        renders.append(ctx.render())
        if len(ctx.messages) < len(now):
            unused.append(1 - ctx.total / budget)
    shares = [common_prefix_length(a, b) / len(a) for a, b in itertools.pairwise(renders)]
    return shares[20:], unused


def test_fresh_builds_keep_their_prefix_as_the_history_grows(tmp_path: Path) -> None:
    """The default grid (8% of the section's room per step): most prompts begin with the whole
    previous prompt, and the budget stays used. With the grid off (``cut_step: 0``,
    the room filled exactly) every prompt starts elsewhere: that is what the grid is for."""
    shares, unused = _shares(_project(tmp_path / "grid"), 20_000)
    assert unused and sum(unused) / len(unused) <= 0.05 and max(unused) <= 0.1
    assert sum(shares) / len(shares) >= 0.6, sum(shares) / len(shares)
    exact, exact_unused = _shares(_project(tmp_path / "exact", ", cut_step: 0"), 20_000)
    assert sum(exact) / len(exact) < 0.2
    assert sum(exact_unused) / len(exact_unused) <= sum(unused) / len(unused)


def test_a_coarser_grid_keeps_more_prefix_for_more_room(tmp_path: Path) -> None:
    fine, fine_unused = _shares(_project(tmp_path / "fine"), 20_000)
    coarse, coarse_unused = _shares(_project(tmp_path / "coarse", ", cut_step: 0.25"), 20_000)
    assert sum(coarse) / len(coarse) > sum(fine) / len(fine)
    assert sum(coarse) / len(coarse) >= 0.8
    assert sum(coarse_unused) / len(coarse_unused) > sum(fine_unused) / len(fine_unused)


def test_budgets_a_few_percent_apart_share_their_cut_point(tmp_path: Path) -> None:
    """The grid's step is ``cut_step`` of the room rounded down to a ladder of sizes
    (2 ** (i / 4) tokens): budgets 9,150 to 10,650 all get a 724-token step (8% of the
    room is 732 to 852), so their prompts start at one of a few grid points, each the same
    exchange cut at the same place, and fill each budget to within about one step. Were
    the step 8% of each budget's room, every budget would cut somewhere else."""
    root = _project(tmp_path)
    profiles = load_profiles(root)
    now = _loop(random.Random(11), 60)[-1]
    snap = Snapshot.build(root, messages=now, task="t", include_git_log=False, profiles=profiles)
    assert history_mod._grid_step(9_150 * 0.08) == history_mod._grid_step(10_650 * 0.08) == 724
    starts: set[str] = set()
    for budget in range(9_150, 10_651, 25):
        ctx = assemble_snapshot(snap, "agent", Budget.absolute(budget), COUNTER)
        assert COUNTER.count(ctx.render()) == ctx.total <= budget
        assert ctx.total >= budget - 2 * 724, (budget, ctx.total)
        first = ctx.messages[0]
        starts.add(f"{first.seq}:{len(first.content)}")
    assert 1 < len(starts) <= 4, starts  # (1,500 + 724) // 724 + 1 points at most


def test_a_conversation_form_is_remembered_once_asked_for_again(tmp_path: Path) -> None:
    """A budget met once leaves no fitted form behind; met again, its form is fitted a
    second time and remembered, and the prompt is the same each time."""
    root = _project(tmp_path)
    profiles = load_profiles(root)
    now = _loop(random.Random(13), 40)[-1]

    def prompt(budget: int) -> str:
        snap = Snapshot.build(
            root, messages=now, task="t", include_git_log=False, profiles=profiles
        )
        return assemble_snapshot(snap, "agent", Budget.absolute(budget), COUNTER).render()

    held = fit_mod._FORMS.memo
    for budget in (9_001, 9_733, 12_345):
        before = len(held)
        first = prompt(budget)
        assert len(held) == before  # asked once: nothing kept
        assert prompt(budget) == first
        grown = len(held)
        assert grown > before  # asked again: remembered
        assert prompt(budget) == first and len(held) == grown  # and found


def test_the_grid_step_ladder_is_integer_and_monotone() -> None:
    steps = history_mod._GRID_STEPS
    assert steps[:6] == [1, 2, 3, 4, 5, 6] and steps == sorted(set(steps))
    assert all(b / a < 1.25 for a, b in itertools.pairwise(steps) if a >= 16)
    for size in (0.2, 1, 1.5, 99.9, 724, 731.99, 852, 1e9):
        step = history_mod._grid_step(size)
        assert step <= max(1, size) and (step == steps[-1] or steps[steps.index(step) + 1] > size)


def test_shared_preparation_gives_the_prompt_prepared_from_nothing(tmp_path: Path) -> None:
    root = _project(tmp_path)
    profiles = load_profiles(root)
    prompts = _loop(random.Random(7), 40)
    budgets = [900, 4_000, 15_000]

    def render(now: list[ChatMessage], budget: int) -> str:
        snap = Snapshot.build(
            root, messages=now, task="t", include_git_log=False, profiles=profiles
        )
        return assemble_snapshot(snap, "agent", Budget.absolute(budget), COUNTER).render()

    warm = {(i, b): render(now, b) for i, now in enumerate(prompts) for b in budgets}
    assert window_mod._SHARED  # the process published what it prepared
    # Equal messages that are other objects (a request decoded again) reuse it too.
    again = [[ChatMessage(m.role, m.content, m.tool_calls, m.tool_call_id, seq=m.seq) for m in now]
             for now in prompts]  # fmt: skip
    for i, now in enumerate(again):
        window_mod._SHARED.clear()
        window_mod._SHARED_DIGESTS.clear()
        history_mod._GRID_CUTS.memo.clear()  # grid cuts are found by the prepared exchange
        history_mod._GRID_CUTS.size = 0
        for b in budgets:
            assert render(now, b) == warm[i, b]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_piece_starts_split_counts_exactly(name: str) -> None:
    """Where ``_starts_piece`` says a piece starts, the counts of the two sides add up to
    the count of the whole: random texts of letters, CJK, digits, punctuation, slashes,
    apostrophes, marks, spaces, tabs and newlines."""
    counter = exact_counter(name)
    alphabet = [*"abcXYZ  \n\n\t/\\()[]{}'\".,;:!?-_=+0123456789", "日", "本", "é", "ß", "\u0301",
                "\r", "  ", "'s", "'ll", "//", "\n/", "😀", "\u00a0", "\x85", "\u3000", "—", "…",
                "。", "、", "\x1c"]  # fmt: skip
    rng = random.Random(name)
    checked = 0
    for _ in range(150):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(2, 200)))
        whole = counter.count(text)
        for p in range(1, len(text)):
            if _starts_piece(text, p, len(text)):
                checked += 1
                assert counter.count(text[:p]) + counter.count(text[p:]) == whole, (text, p)
    assert checked > 1000


def test_cut_counts_follow_token_offsets() -> None:
    rng = random.Random(3)
    for base in TEXTS:
        text = base * 20
        starts = _token_starts(COUNTER, text)
        assert starts is not None
        for _ in range(40):
            k = rng.randint(1, len(text) - 1)
            head = f"{text[:k]}\n[cut]"
            assert _head_count(text, k, starts, COUNTER, head) == COUNTER.count(head)
            tail = f"[cut]\n{text[k:]}"
            assert _tail_count(text, k, starts, COUNTER, tail) == COUNTER.count(tail)
        for limit in (50, 333, 1000):
            for keep_head in (True, False):
                cut = cut_text(text, limit, COUNTER, "[shortened]", keep_head=keep_head)
                assert cut is not None and cut.tokens == COUNTER.count(cut.text) <= limit


LINE_ENDS = [
    "The parser reads each token. It stops at the end; then it returns.\n",
    "日本語のテキストと中文内容混合在一起。データベースの接続に失敗しました。",
    "value 12345\nnext 678 and 9\n",
    "a list.\nb\n\nc, d; e!\n",
    "word  \nword\t\nend\n",
    "ﬁx 🙂 done ²\nnaïve café\n",
    "def f(x):\n    return x.y  # ok\n",
]


def test_cuts_ending_where_a_piece_ends_are_counted_from_offsets_alone() -> None:
    """A cut whose kept part ends in a letter or digit where a piece of the text ends
    (before punctuation, at a space before a word, before a newline) is counted from
    the text's token offsets alone (the newline before its notice starts a piece); each
    cut's count, and the count before its notice, are exact."""
    note = "[shortened]"
    at_piece_end = 0
    for base in LINE_ENDS:
        text = base * 40
        for limit in range(20, COUNTER.count(text), 9):
            cut = cut_text(text, limit, COUNTER, note, total=COUNTER.count(text))
            assert cut is not None and cut.tokens == COUNTER.count(cut.text) <= limit
            if cut.split:
                assert cut.before == COUNTER.count(cut.text[: cut.split]), (base, limit)
            kept = cut.text.removesuffix("\n" + note)
            end = len(kept)
            if (
                kept
                and kept[-1].isalnum()
                and (text[end] == "\n" or _starts_piece(text, end, len(text)))
            ):
                at_piece_end += 1
    assert at_piece_end > 100, at_piece_end


def test_fresh_snapshots_follow_a_root_link_and_file_changes(tmp_path: Path) -> None:
    """Fresh snapshots reuse the process's resolution of the root and its hashed head
    (texts, paths): a link re-pointed to another project, or a file changed, is seen
    by the next build, and its id is the one a build from nothing gives."""
    one, two = _project(tmp_path / "one"), _project(tmp_path / "two")
    for root, text in ((one, "# One\n\nFirst project.\n"), (two, "# Two\n\nSecond one.\n")):
        (root / ".personae" / "project").mkdir()
        (root / ".personae" / "project" / "VISION.md").write_text(text, encoding="utf-8")
    link = tmp_path / "current"
    link.symlink_to(one)

    def build() -> Snapshot:
        return Snapshot.build(link, task="t", include_git_log=False)

    first = build()
    assert first.root == one.resolve() and build().id == first.id
    link.unlink()
    link.symlink_to(two)
    moved = build()
    assert moved.root == two.resolve() and "Second one." in moved.texts["vision"]
    (two / ".personae" / "project" / "VISION.md").write_text("# Two\n\nLater.\n", "utf-8")
    changed = build()
    assert "Later." in changed.texts["vision"] and changed.id != moved.id
    window_mod._SHARED_ROOTS.clear()
    window_mod._SHARED_FILES.clear()
    snapshot_mod._HEADS.clear()
    assert build().id == changed.id


def test_a_fresh_root_whose_folder_became_a_link_is_resolved_again(tmp_path: Path) -> None:
    """A root given by its own resolved path is checked with one stat: a folder on the
    path swapped for a link to another project is still seen by the next build."""
    for name, text in (("a", "First project."), ("c", "Other project.")):
        project = _project(tmp_path / name / "p") / ".personae" / "project"
        project.mkdir()
        (project / "VISION.md").write_text(f"# V\n\n{text}\n", encoding="utf-8")
    given = (tmp_path / "a" / "p").resolve()

    def build() -> Snapshot:
        return Snapshot.build(given, task="t", include_git_log=False)

    first = build()
    assert first.root == given and build().id == first.id
    (tmp_path / "a").rename(tmp_path / "b")
    (tmp_path / "a").symlink_to(tmp_path / "c")
    moved = build()
    assert moved.root == (tmp_path / "c" / "p").resolve()
    assert "Other project." in moved.texts["vision"] and moved.id != first.id


def _attributes(snap: Snapshot) -> dict[str, object]:
    return {k: v for k, v in vars(snap).items() if k != "window"}


def _checked(root: Path, **fields: object) -> Snapshot:
    """A fresh build, which must equal a build from nothing (a window of its own, no
    process memo), then another fresh build after the caller changed the first one's
    dicts, which must too."""
    got = Snapshot.build(root, **fields)  # type: ignore[arg-type]
    scratch = Snapshot.build(root, window=ContextWindow(), **fields)  # type: ignore[arg-type]
    assert _attributes(got) == _attributes(scratch)
    got.texts["task"] = "changed by the caller"  # its own dicts
    got.files.clear()
    again = Snapshot.build(root, **fields)  # type: ignore[arg-type]
    assert _attributes(again) == _attributes(scratch)
    assert again.window is not got.window and again.window is not None
    assert again.texts is not got.texts and again.files is not got.files
    return again


def test_a_fresh_build_repeated_is_the_one_built_from_nothing(tmp_path: Path) -> None:
    """A fresh build with the arguments of the process's previous one reuses it (a server
    builds the same snapshot per role and retry). Each build equals a build from nothing
    (a window of its own, no process memo) after every change a caller or the disk may
    make between two builds: a message appended, replaced or changed in place, the same
    list refilled, a warnings list grown, a file changed or created, and a caller
    changing a snapshot's dicts."""
    root = _project(tmp_path)
    (root / ".personae" / "project").mkdir()
    vision = root / ".personae" / "project" / "VISION.md"
    vision.write_text("# Vision\n\nFirst.\n", encoding="utf-8")
    profiles = load_profiles(root)
    msgs = _loop(random.Random(3), 6)[-1]
    warnings: list[str] = []
    dicts = [
        {"role": m.role, "content": m.content, "tool_call_id": m.tool_call_id, "seq": m.seq,
         "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                        for c in m.tool_calls]}
        for m in msgs
    ]  # fmt: skip

    def check(given: list[object]) -> Snapshot:
        return _checked(root, messages=given, task="t", include_git_log=False,
                        profiles=profiles, warnings=warnings)  # fmt: skip

    first = check(msgs)
    assert fresh_mod._LAST  # the reuse is what this test checks
    ids = {first.id}
    msgs.append(ChatMessage("user", "one more", seq=msgs[-1].seq + 1))
    ids.add(check(msgs).id)
    msgs[2] = ChatMessage(msgs[2].role, msgs[2].content + " changed", msgs[2].tool_calls,
                          msgs[2].tool_call_id, seq=msgs[2].seq)  # fmt: skip
    ids.add(check(msgs).id)
    msgs[:] = [ChatMessage("user", f"other {m.seq}", seq=m.seq) for m in msgs]  # same length
    ids.add(check(msgs).id)
    assert check(dicts).id == first.id  # the first messages, as dicts
    dicts[1]["content"] = "a dict changed in place"
    ids.add(check(dicts).id)
    dicts.append(dict(dicts[0], seq=99))
    ids.add(check(dicts).id)
    warnings.append("a problem met before building")
    assert check(dicts).warnings == ("a problem met before building",)
    vision.write_text("# Vision\n\nSecond, longer.\n", encoding="utf-8")
    changed = check(dicts)
    assert "Second, longer." in changed.texts["vision"]
    (root / ".personae" / "directive.md").write_text("Be brief.\n", encoding="utf-8")
    created = check(dicts)
    assert created.texts["directive"] == "Be brief."
    created.texts["directive"] = "changed by the caller"
    created.files.clear()
    assert check(dicts).texts["directive"] == "Be brief."
    ids |= {changed.id, created.id}
    assert len(ids) == 8  # every change above but the warnings gave another snapshot id
    assert check([]).messages == () and check(msgs).messages == tuple(msgs)


def test_a_fresh_build_with_messages_appended_is_the_one_built_from_nothing(
    tmp_path: Path,
) -> None:
    """The previous fresh build's messages followed by more (an agent loop's next turn,
    one or more messages, objects or dicts) reuse it and hash only the new ones; an
    earlier message changed in place, messages taken back and none given do not."""
    root = _project(tmp_path)
    profiles = load_profiles(root)

    def check(given: list[object] | None) -> Snapshot:
        return _checked(root, messages=given, task="t", include_git_log=False,
                        profiles=profiles)  # fmt: skip

    ids: set[str] = set()
    rng = random.Random(5)
    turns = _loop(rng, 12)[-1]
    grown: list[object] = []
    for i, m in enumerate(turns):
        grown.append(m if i % 3 else {"role": m.role, "content": m.content, "seq": m.seq,
                                      "tool_call_id": m.tool_call_id,
                                      "tool_calls": [{"id": c.id, "name": c.name}
                                                     for c in m.tool_calls]})  # fmt: skip
        if rng.random() < 0.6:
            ids.add(check(grown).id)
        if i == 20:
            first_dict = next(g for g in grown if isinstance(g, dict))
            first_dict["content"] = "changed in place, then more appended"
        if i == 30:
            del grown[-3:]
        if i == 40:
            assert check(None).messages == ()
    assert fresh_mod._LAST  # the reuse is what this test checks
    assert len(ids) > 20


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_token_offsets_are_tiktokens(name: str) -> None:
    """The offsets cuts read are tiktoken's ``decode_with_offsets`` (a token that starts
    inside a character starts at that character), over ASCII, CJK, emoji, combining
    marks and odd spaces, whether read in order, from the end or at random places (they
    are computed as far as asked), from the tokens a count kept or encoded anew, with
    every token unknown at first; a lone surrogate gives none."""
    encoding = exact_counter(name).encoding
    rng = random.Random(31)
    alphabet = "abc déf 日本語のテキスト 🙂🙃 \n\t.,;'\"x/ é\u0301 \u00a0\u0085\u3000"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 200))) for _ in range(400)]
    texts += [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(3000, 9000))) for _ in range(6)
    ]
    # Longer than one batch of the table's reads (_PICK tokens): read in batches.
    texts.append("".join(rng.choice(alphabet) for _ in range(3 * _textcut_mod._PICK)))
    _textcut_mod._TOKEN_CHARS.pop(name, None)  # every token unknown: the table learns them
    for text in [*texts, *TEXTS, "plain ascii only", "x" * 5000]:
        tokens = encoding.encode_ordinary(text)
        want = encoding.decode_with_offsets(tokens)[1]
        given = _starts_of(encoding, text, array("I", tokens))  # tokens a count kept
        assert given is not None and list(given) == want
        anew = _starts_of(encoding, text)
        assert anew is not None and [anew[j] for j in reversed(range(len(want)))] == want[::-1]
        probed = _starts_of(encoding, text)
        assert probed is not None
        for j in sorted(rng.sample(range(len(want)), min(5, len(want)))):
            assert probed[j] == want[j]
            p = rng.randint(0, len(text))
            assert probed.tokens_before(p) == bisect.bisect_left(want, p)
    assert _starts_of(encoding, "a\ud800b") is None
    # The per-token tables span the whole vocabulary: the garbage collector must never
    # walk them (as lists they made each young collection after a first cut take ms).
    *tables, starting_inside = _textcut_mod._TOKEN_CHARS[name]
    for table in tables:
        assert len(table) == encoding.n_vocab and len(gc.get_referents(table)) <= 1
    # The set of tokens that start inside a character holds those the arrays flag.
    assert starting_inside == {t for t in range(encoding.n_vocab) if tables[1][t]}
    assert starting_inside  # the alphabet's emoji are split inside their bytes
    # Offsets over tokens the table has not met: one (its count reaches the sentinel)
    # and two (their sum overflows the offsets' array) in one pass.
    known = "alpha beta gamma delta\n" * 40
    for new, unknown in (("7", 1), ("7\n7", 2), ("7\n8", 2)):
        _textcut_mod._TOKEN_CHARS.pop(name, None)
        learned = _starts_of(encoding, known)
        assert learned is not None and learned[len(learned) - 1] >= 0
        text = known + new
        tokens = encoding.encode_ordinary(text)
        seen = set(encoding.encode_ordinary(known))
        assert sum(t not in seen for t in tokens) == unknown
        got = _starts_of(encoding, text, array("I", tokens))
        assert got is not None and list(got) == encoding.decode_with_offsets(tokens)[1]


def test_water_level_is_the_largest_level_that_fits() -> None:
    """The level read off the breakpoints is the largest cap whose total fits (what a
    bisection over every level finds), for pools of every size."""
    rng = random.Random(5)

    def total(pool: list[tuple[int, int, int, int]], level: int) -> int:
        return sum(max(fl, min(c, level)) for c, fl, _, _ in pool)

    for _ in range(3000):
        pool = []
        for _ in range(rng.randint(0, 24)):
            cost = rng.choice([rng.randint(0, 30), rng.randint(0, 30_000)])
            pool.append((cost, min(cost, rng.randint(0, 40)), 0, 0))
        room = rng.randint(-5, sum(c for c, _, _, _ in pool) + 10)
        got = turnshrink_mod.water_level(pool, room)
        if total(pool, 0) > room:
            assert got is None
            continue
        assert got is not None and total(pool, got) <= room
        assert got == max((c for c, _, _, _ in pool), default=0) or total(pool, got + 1) > room


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_cut_exchanges_are_counted_exactly_from_their_offsets(name: str) -> None:
    """An exchange whose outputs were cut at a new place is counted for the exact
    verification from its parts (each cut output's kept start read off its token
    offsets, the other messages by content) instead of encoding it whole: that count is
    the count of the whole text, followed by a blank line (a piece of the prompt) or by
    the section's closing tag (the last piece), over random outputs of letters, CJK,
    emoji, digits, punctuation, slashes, marks and whitespace runs, starting with any of
    them, cut at random levels."""
    counter = exact_counter(name)
    alphabet = [*"abcXYZ  \n\n\t/\\()[]{}'\".,;:!?-_=+0123456789", "日本", "語の", "é", "ß",
                "\u0301", "\r\n", "    ", "\n\n\n", "'s", "//", "\n/", "😀", "🙂🙃", "\u00a0",
                "\x85", "\u3000", "—", "…", "。", "、", " the ", "word", "\t\t"]  # fmt: skip
    rng = random.Random(name)
    checked = 0
    for round_ in range(100):
        outputs = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(300, 2500)))
            for _ in range(rng.randint(1, 3))
        ]
        calls = tuple(ChatToolCall(f"c{round_}{k}", "read", "{}") for k in range(len(outputs)))
        results = [
            ChatMessage("tool", o, tool_call_id=c.id) for o, c in zip(outputs, calls, strict=True)
        ]
        msgs = (
            ChatMessage("assistant", rng.choice(["", "reading", " x"]), tool_calls=calls),
            *results,
        )
        unit = history_mod.Unit(msgs)
        costs = [[history_mod.MessageCosts(counter, frozenset()).prepare(m)[1] for m in msgs]]
        for level in rng.sample(range(40, max(c for c in costs[0]) + 1), 6):
            pool = [(c, 0, 0, j) for j, c in enumerate(costs[0]) if j]
            made: history_mod.Cuts = {}
            held = round_ % 2 == 0  # the cuts in the process-wide memo, or the fitting's own
            turn, _, shrunk = turnshrink_mod.apply_level(
                [unit], costs, (pool, level), counter, None if held else made
            )
            block = history_mod._render_cut(turn[0], counter, None if held else made)
            later = _counted_mod._later(counter, block)
            if not shrunk or later is None:
                continue
            for after in ("\n\n", "\n</recent_messages>\n\n", "\n</recent_messages>"):
                got = later(after)
                if got is not None:
                    checked += 1
                    assert got == counter.count(block + after), (block, after)
            # In a prompt rendered for this fitting only (its pieces new to it), the cut
            # exchange is counted by what was said, first, in the middle or last.
            notice, user = "[3 earlier messages omitted]", "### user\nnext"
            for pieces in ([block, user], [notice, block, user], [notice, block]):
                rendered, total = _counted_mod.render_counted(
                    counter, [("task", ["fix it"]), ("recent_messages", pieces)],
                    remember_prompt=False,
                )  # fmt: skip
                assert total == counter.count(rendered), pieces
    assert checked > 400, checked


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_a_text_followed_by_more_is_counted_from_its_last_pieces(name: str) -> None:
    """``count_followed`` (a notice followed by a blank line, counted from the notice's
    count and its last pieces) is the count of the whole, for random notices and texts
    of letters, CJK, digits, punctuation and whitespace, followed by blank lines, tags
    or other text."""
    counter = exact_counter(name)
    alphabet = [*"abc XYZ\n\t/()[]{}'\".,;:!?-_0123456789", "日本", "😀", "\u00a0", "  ", "\n\n"]
    rng = random.Random(name)
    texts = [
        f"[{rng.randint(1, 10**6)} earlier messages omitted; oldest exchanges are evicted first]"
        for _ in range(50)
    ]
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 120))) for _ in range(400)]
    for text in texts:
        for after in ("\n\n", "\n</recent_messages>", "\n\n### user\nhi", rng.choice(alphabet)):
            assert count_followed(counter, text, after) == counter.count(text + after), (
                text,
                after,
            )


@pytest.mark.parametrize("history_priority", [10, 50, 90])
def test_an_outcomes_only_draft_names_what_a_whole_fitting_cuts(history_priority: int) -> None:
    """The first fitting of an assembly is only asked what it cut (a warning naming it
    is added and everything fitted again): when the latest turn alone is over the
    budget, that fitting leaves the conversation unfitted. Its outcomes, and the
    result it gives when asked for one, are those of a fitting that fits everything."""
    from personae.context.fit import Draft, SectionContent
    from personae.context.spec import SectionSource, SectionSpec, Truncation

    rng = random.Random(history_priority)
    msgs = _loop(rng, 6)[-1]
    ex = with_oversized_turn(msgs, TEXTS[0] * 12, COUNTER)
    turn = ex.cum_cost[-1] - ex.cum_cost[history_mod.latest_turn_start(ex.units)]
    texts = {  # a pinned task, sections above and below the conversation's priority
        "task": SectionSpec(tag="task", source=SectionSource.TEXT, pinned=True),
        "notes": SectionSpec(tag="notes", source=SectionSource.TEXT, priority=70),
        "docs": SectionSpec(tag="docs", source=SectionSource.TEXT, priority=30,
                            truncation=Truncation.DROP),
    }  # fmt: skip
    history = SectionSpec(
        tag="recent_messages", source=SectionSource.MESSAGES, priority=history_priority
    )
    contents = [
        SectionContent(texts["task"], text="Fix the bug"),
        SectionContent(texts["notes"], text=TEXTS[1][:600]),
        SectionContent(history, units=ex.units, costs=ex.costs, exchanges=ex),
        SectionContent(texts["docs"], text=TEXTS[2][:900]),
    ]
    deferred = 0
    for budget in sorted({rng.randint(200, turn - 1) for _ in range(40)}):
        whole = Draft(contents, budget, COUNTER)
        first = Draft(contents, budget, COUNTER, outcomes_only=True)
        deferred += any(s.deferred for s in first.states)
        assert first.outcomes() == whole.outcomes(), budget
        got, want = first.result(), whole.result()
        assert (got.rendered, got.total) == (want.rendered, want.total), budget
        assert got.total == COUNTER.count(got.rendered) <= budget
    # The conversation is left unfitted only where nothing after it could change:
    # when it comes last (lowest priority) and the sections before it are whole.
    assert deferred if history_priority == 10 else not deferred


def test_the_last_piece_start_is_the_one_a_walk_back_finds() -> None:
    """The last piece start near a text's end (one regular-expression match from the
    end, checked, else the candidates walked back) is the one a walk back over every
    character finds, within the scan's reach, over texts with long runs of letters and
    digits (no candidate for a while), spaces, newlines, punctuation, CJK, marks, and
    word characters that are not letters (the match's near-misses)."""
    alphabet = [*"abcXYZ  \n\n\t/\\()[]{}'\".,;:!?-_=+0123456789", "日本", "。", "、", "é",
                "\u0301", "\r\n", "😀", "\u00a0", " the ", "word", "a" * 41, "1234567890" * 30,
                "x" * 2100, "²", "½", "Ⅳ", "٣", "\n ", "\n/", "\u3000"]  # fmt: skip
    rng = random.Random(7)

    def walked(text: str, end: int) -> int | None:
        for p in range(end - 1, max(0, end - _pieces_mod.SPLIT_SCAN), -1):
            if _starts_piece(text, p, end):
                return p
        return None

    found = 0
    for _ in range(8000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))
        end = rng.randint(0, len(text))
        want = walked(text, end)
        assert _pieces_mod.last_piece_start(text, end) == want, (text, end)
        found += want is not None
    assert found > 1000


def test_token_offsets_read_by_many_threads_at_once_are_tiktokens() -> None:
    """Offsets are computed as far as asked and shared process-wide: threads reading
    one text's offsets at once, at random places, each read tiktoken's (no thread
    extends them from a stale end)."""
    import threading

    encoding = COUNTER.encoding
    text = "".join(random.Random(3).choices(["word ", "日本語", "🙂", "x\n", "é\u0301"], k=6000))
    tokens = encoding.encode_ordinary(text)
    want = encoding.decode_with_offsets(tokens)[1]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch as often as they can
    try:
        for round_ in range(20):
            starts = _starts_of(encoding, text, array("I", tokens))
            assert starts is not None
            wrong: list[int] = []

            def read(seed: int, starts: Sequence[int] = starts, wrong: list[int] = wrong) -> None:
                rng = random.Random(seed)
                for j in sorted(rng.sample(range(len(want)), 40)):
                    if starts[j] != want[j]:
                        wrong.append(j)

            threads = [threading.Thread(target=read, args=(round_ * 8 + k,)) for k in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not wrong and list(starts) == want
    finally:
        sys.setswitchinterval(switch)
