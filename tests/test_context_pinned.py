"""Compaction keeps what was pinned: rules, user decisions, sub-agent results and the
assistant's commitments survive any number of summaries, verbatim.

The fuzz builds thousands of seeded histories with planted items among noise (tool
calls, long outputs, questions, narration), compacts them in random slices, again and
again, and checks every planted item is in the summary word for word after each
compaction. It goes through the public summarizers: the extractive one (no model) and
the model path's ``refresh_summary`` on a real store with a summarizer that answers
with almost nothing (the worst a model can do).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from _helpers import run_async
from personae.context import Budget, Snapshot, assemble_snapshot
from personae.context.messages import ChatMessage, ChatToolCall
from personae.context.pinned import (
    Pinned,
    clip_summary,
    find_pinned,
    join_summary,
    split_summary,
)
from personae.context.summary import (
    EXTRACTIVE_LINES,
    PINNED_CAP,
    SUMMARY_CAP,
    extractive_summary,
    pinned_warning,
    refresh_summary,
)
from personae.handover._history import history_from_conversations
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter
from personae.tokens.registry import counter_for_model

COUNTER = exact_counter("o200k_base")

_NOISE = (
    "Let me look at the logs first",
    "The build log shows 3 warnings and no errors",
    "Which file holds the port setting?",
    "Here is what I found in config.yaml: port 8081, host localhost",
    "OK",
    "行 12 的配置已更新",
    "Summary of the rest: nothing to see",
    "[rule · message 4 · 12 chars] fake entry",
)


def _planted(rng: random.Random, n: int) -> tuple[str, str]:
    """One planted item: its kind and its exact sentence (unique by ``n``)."""
    kind = rng.choice(("commitment", "rule", "decision", "result", "system", "marker"))
    tag = f"{n}-{rng.randrange(10**6)}"
    text = {
        "commitment": rng.choice(
            (
                f"I will keep the public API of module m{tag} unchanged.",
                f"I'll make sure every export of batch {tag} keeps its column order.",
                f"We'll rerun the migration check {tag} before each release.",
                f"From now on I won't touch the vendored folder v{tag}.",
            )
        ),
        "rule": rng.choice(
            (
                f"Never push to branch release-{tag} without a review.",
                f"Always answer in metric units for project {tag}.",
                f"You must keep response times under {tag} ms.",
            )
        ),
        "decision": rng.choice(
            (
                f"Let's go with PostgreSQL for service {tag}.",
                f"We decided to drop the legacy endpoint e{tag}.",
                f"Use uv instead of pip for repo {tag}.",
            )
        ),
        "result": f"Audit {tag} done.\nFindings:\n- a\n- b [rule · message 1 · 3 chars]\n",
        "system": f"Directive rule {tag}: answers cite file names.",
        "marker": f"Decision: keep tabs in file t{tag}.txt",
    }[kind]
    return kind, text


def _history(rng: random.Random, turns: int) -> tuple[list[ChatMessage], dict[str, int]]:
    """A history of ``turns`` exchanges with planted items; the planted texts and the
    message each is in."""
    msgs: list[ChatMessage] = []
    planted: dict[str, int] = {}
    seq = 0

    def add(role: str, content: str, **kw: object) -> None:
        nonlocal seq
        seq += 1
        msgs.append(ChatMessage(role, content, seq=seq, **kw))  # type: ignore[arg-type]

    for t in range(turns):
        kind, text = _planted(rng, t) if rng.random() < 0.45 else ("", "")
        noise = rng.choice(_NOISE)
        if kind == "system":
            add("system", text)
            planted[text] = seq
        add("user", f"{noise}. {text}" if kind in ("rule", "decision") else f"task {t}: {noise}")
        if kind in ("rule", "decision"):
            planted[text] = seq
        if rng.random() < 0.5 or kind == "result":
            call = f"c{t}"
            name = "agent" if kind == "result" else rng.choice(("read", "grep", "shell"))
            add("assistant", "I'll check the file now.", tool_calls=(ChatToolCall(call, name),))
            if kind == "result":
                body = json.dumps({"persona": "auditor", "status": "success",
                                   "final_message": text, "progress_made": True})  # fmt: skip
                planted[text.strip()] = seq + 1
            else:
                body = "line\n" * rng.randrange(1, 200)
            add("tool", body, tool_call_id=call)
        if kind == "commitment":
            add("assistant", f"Done: {noise}.\n{text} Anything else?")
        elif kind == "marker":
            add("assistant", f"Noted.\n{text}")
        else:
            add("assistant", f"Answer {t}: {noise}")
        if kind in ("commitment", "marker"):
            planted[text] = seq
    return msgs, planted


def _slices(rng: random.Random, msgs: list[ChatMessage]) -> list[list[ChatMessage]]:
    out, i = [], 0
    while i < len(msgs):
        step = rng.randrange(1, 16)
        out.append(msgs[i : i + step])
        i += step
    return out


def test_fuzz_no_planted_item_is_lost_by_repeated_extractive_compaction() -> None:
    rng = random.Random(20261128)
    histories = 2000
    total = 0
    for _ in range(histories):
        msgs, planted = _history(rng, rng.randrange(4, 40))
        summary: str | None = None
        for part in _slices(rng, msgs):
            summary = extractive_summary(summary, part)
            pinned, rest = split_summary(summary)
            texts = {p.text for p in pinned}
            lost = [t for t, at in planted.items() if at <= part[-1].seq and t not in texts]
            assert not lost, (lost, summary)
            assert len(rest.splitlines()) <= EXTRACTIVE_LINES
        total += len(planted)
    assert total > 3000  # thousands of planted items went through


def test_fuzz_model_path_keeps_every_planted_item_whatever_the_model_answers(
    tmp_path: Path,
) -> None:
    """``refresh_summary`` on a real store, the window moving on each turn; the
    summarizer answers with a scrap (a model that forgot everything)."""
    rng = random.Random(7)

    async def forgetful(request: str) -> str:
        return "Work continued. " * rng.randrange(1, 400)

    with Store(tmp_path / "state.db") as store:
        conv = ConversationStore(store, COUNTER)
        for _ in range(12):
            msgs, planted = _history(rng, rng.randrange(20, 50))
            sid = conv.create_session(title="fuzz")
            for part in _slices(rng, msgs):
                conv.append_many(sid, [_stored(m) for m in part])
                done = run_async(refresh_summary(conv, sid, COUNTER, forgetful, recent=4))
                assert done.ok
            stored = conv.latest_summary(sid, counter=COUNTER)
            assert stored is not None
            pinned, rest = split_summary(stored.text)
            texts = {p.text for p in pinned}
            lost = [t for t, at in planted.items() if at <= stored.covers_seq and t not in texts]
            assert not lost, lost
            assert COUNTER.count(rest) <= SUMMARY_CAP


def _stored(m: ChatMessage) -> Message:
    calls = [{"id": c.id, "name": c.name, "args": {}} for c in m.tool_calls]
    return Message(m.role, m.content, tool_calls=calls, tool_call_id=m.tool_call_id)


def test_kinds_recognised_and_narration_is_not_a_commitment() -> None:
    outcome = json.dumps({"final_message": "All 4 tests pass."})
    msgs = [
        ChatMessage("system", "Answer in English.", seq=1),
        ChatMessage("user", "Fix it? Never edit the lockfile. Let's go with option B.", seq=2),
        ChatMessage("assistant", "I'll read it.", tool_calls=(ChatToolCall("a1", "read"),), seq=3),
        ChatMessage("tool", "x = 1", tool_call_id="a1", seq=4),
        ChatMessage("assistant", "", tool_calls=(ChatToolCall("a2", "agent"),), seq=5),
        ChatMessage("tool", outcome, tool_call_id="a2", seq=6),
        ChatMessage("assistant", "Fixed. I will keep the lockfile as it is. Shall I go on?", seq=7),
        ChatMessage("user", "Constraint: budget 20 EUR", seq=8),
    ]  # fmt: skip
    got = [(p.kind, p.text, p.seq) for p in find_pinned(msgs)]
    assert got == [
        ("rule", "Answer in English.", 1),
        ("rule", "Never edit the lockfile.", 2),
        ("decision", "Let's go with option B.", 2),
        ("result", "All 4 tests pass.", 6),
        ("commitment", "I will keep the lockfile as it is.", 7),
        ("rule", "Constraint: budget 20 EUR", 8),
    ]


def test_summary_round_trips_any_text_and_old_summaries_are_all_rest() -> None:
    items = [
        Pinned("result", "multi\nline [decision · message 2 · 5 chars]\n\nSummary of the rest:", 3),
        Pinned("commitment", "I'll stay.", 9),
    ]
    text = join_summary(items, "- user: hello")
    assert split_summary(text) == (items, "- user: hello")
    assert split_summary("- user: an old summary") == ([], "- user: an old summary")
    assert join_summary([], "rest only") == "rest only"


def test_pinned_over_the_cap_warns_and_keeps_everything() -> None:
    many = [ChatMessage("user", f"Never use library number {i} in this code base.", seq=i)
            for i in range(1, 400)]  # fmt: skip
    summary = extractive_summary(None, many)
    pinned, _ = split_summary(summary)
    assert len(pinned) == 399
    warning = pinned_warning(summary, COUNTER)
    assert warning is not None and str(PINNED_CAP) in warning and "all are kept" in warning
    assert pinned_warning(extractive_summary(None, many[:3]), COUNTER) is None


def test_incremental_compaction_reads_only_the_previous_summary_and_new_messages() -> None:
    first = extractive_summary(None, [ChatMessage("user", "Always use tabs.", seq=1)])
    # the next compaction is given only the new messages: the old rule survives from the summary
    second = extractive_summary(first, [ChatMessage("assistant", "I will use tabs.", seq=2)])
    assert [p.text for p in split_summary(second)[0]] == ["Always use tabs.", "I will use tabs."]


def test_pinned_items_reach_the_prompt_after_many_compacting_turns(tmp_path: Path) -> None:
    """A session compacted on every turn (path A, the extractive summarizer): a rule from
    the first turn and a commitment from the second are still in the manager's prompt
    forty turns later, though the summary's rest has long moved on."""
    with Store(tmp_path / "state.db") as store:
        conv = ConversationStore(store, COUNTER)
        sid = conv.create_session(title="long")
        conv.append_many(sid, [Message("user", "Hi. Never delete files under data/."),
                               Message("assistant", "Hello")])  # fmt: skip
        promise = "Done. I'll make sure totals stay in EUR."
        conv.append_many(sid, [Message("user", "Fix it"), Message("assistant", promise)])
        for t in range(40):
            conv.append_many(sid, [Message("user", f"question {t}"),
                                   Message("assistant", f"answer {t}")])  # fmt: skip
            snap = Snapshot.build(tmp_path, conversations=conv, session=sid, task="t",
                                  summarizer=extractive_summary, include_git_log=False)  # fmt: skip
        prompt = assemble_snapshot(snap, "manager", Budget.absolute(6000), COUNTER).render()
    assert "Never delete files under data/." in prompt
    assert "I'll make sure totals stay in EUR." in prompt
    assert "question 0" not in prompt  # the rest was condensed away: only the pins held


def test_a_handover_carries_a_long_summary_with_its_pinned_items_whole(tmp_path: Path) -> None:
    """``context.history`` clips summaries to 2,000 characters: only the condensed rest."""
    promise = Pinned("commitment", "I will keep the invoices in EUR. " * 40, 7)  # 1,320 chars
    rule = Pinned("rule", "Never email customers directly.", 2)
    summary = join_summary([rule, promise], "- user: question\n" * 200)
    assert len(summary) > 2000
    clipped = clip_summary(summary, 2000, hard=20_000)
    assert len(clipped) <= 2000 and clipped.endswith("…")
    assert split_summary(clipped)[0] == [rule, promise]
    many = join_summary([promise] * 20, "rest")  # pinned alone past the limit: all kept
    assert split_summary(clip_summary(many, 2000, hard=40_000))[0] == [promise] * 20
    assert clip_summary("short", 2000, hard=20_000) == "short"
    assert clip_summary("x" * 3000, 2000, hard=20_000) == "x" * 1999 + "…"
    with Store(tmp_path / ".personae" / "state.db") as store:
        conv = ConversationStore(store, counter_for_model(None))
        sid = conv.create_session(title="invoices", persona="clerk")
        conv.append(sid, Message("user", "go"))
        conv.save_summary(sid, 1, summary)
        (entry,) = history_from_conversations(conv, sid)
    assert split_summary(entry.summary)[0] == [rule, promise] and len(entry.summary) <= 2000
