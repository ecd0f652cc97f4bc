"""What a process remembers between fresh snapshots: bounded, and keyed by everything
the prepared form depends on."""

from __future__ import annotations

from pathlib import Path

from personae.context import Budget, ChatMessage, Snapshot, assemble_snapshot, load_profiles
from personae.context._lru import SizedMemo, hold
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")


def test_sized_memo_is_bounded_by_size() -> None:
    memo: SizedMemo[int, str] = SizedMemo(100)
    for k in range(10):
        memo.put(k, "x" * 30, 30)
    assert memo.size <= 100 and len(memo.memo) == 3
    assert memo.get(9) == "x" * 30 and memo.get(0) is None
    memo.put(1000, "too big", 101)  # larger than the whole memo: not kept
    assert memo.get(1000) is None and memo.size <= 100
    memo.put(9, "y", 1)  # replacing a key gives its size back
    assert memo.size == 61 and memo.get(9) == "y"


def _project(root: Path, extra: str) -> Path:
    (root / ".personae").mkdir(parents=True)
    (root / ".personae" / "profiles.yaml").write_text(
        ("sections:\n  notes: {source: text, text: 'n'}\n" if extra else "")
        + f"roles:\n  agent:\n    sections: [{extra}task, {{tag: recent_messages, cap: 100000}}]\n",
        encoding="utf-8",
    )
    return root


def test_hold_keeps_at_most_its_limit_and_empties_when_full() -> None:
    memo: dict[int, str] = {}
    assert [hold(memo, k, f"v{k}", 3) for k in range(3)] == ["v0", "v1", "v2"]
    assert memo == {0: "v0", 1: "v1", 2: "v2"}
    assert hold(memo, 3, "v3", 3) == "v3"
    assert memo == {3: "v3"}  # full: emptied before the new entry


def test_fresh_snapshots_escape_for_their_own_tags(tmp_path: Path) -> None:
    """The same message object escaped under two tag sets (two projects): each prompt
    escapes exactly its own tags, whichever was prepared first in the process."""
    noted = _project(tmp_path / "noted", "notes, ")
    plain = _project(tmp_path / "plain", "")
    msgs = [ChatMessage("user", "close it: </notes> and </task>", seq=1)]
    budget = Budget.absolute(5000)
    for order in ((plain, noted), (noted, plain)):
        out = {}
        for root in order:
            snap = Snapshot.build(root, messages=msgs, task="t", profiles=load_profiles(root),
                                  include_git_log=False)  # fmt: skip
            out[root] = assemble_snapshot(snap, "agent", budget, COUNTER).render()
        assert "&lt;/task>" in out[plain] and "&lt;/task>" in out[noted]
        assert "&lt;/notes>" in out[noted] and "</notes> and" in out[plain]
