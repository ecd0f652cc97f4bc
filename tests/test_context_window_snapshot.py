"""A turn where nothing changed is the window's previous snapshot; any change is seen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from personae.context import ChatMessage, ContextWindow, Snapshot, load_profiles
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")

_APPEND = """
import sys
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter
with Store(sys.argv[1]) as store:
    conv = ConversationStore(store, exact_counter("o200k_base"))
    conv.append(sys.argv[2], Message("user", sys.argv[3]))
"""


def _rewrite(path: Path, text: str) -> None:
    """Same size, the modification time moved by 1 ns only (the probe must still see it)."""
    before = path.stat()
    path.write_text(text, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))


@pytest.mark.process
def test_store_turn_is_the_previous_snapshot_until_a_file_a_message_or_an_option_changes(
    tmp_path: Path,
) -> None:
    vision = tmp_path / ".personae" / "project" / "VISION.md"
    vision.parent.mkdir(parents=True)
    vision.write_text("# Vision\n\nShip the alpha.\n", encoding="utf-8")
    profiles = load_profiles(tmp_path)
    db = tmp_path / "state.db"
    with Store(db) as store:
        conv = ConversationStore(store, COUNTER)
        sid = conv.create_session()
        conv.append_many(sid, [Message("user", "hello"), Message("assistant", "hi")])
        window = ContextWindow()

        def build(window: ContextWindow | None = window, **kw: object) -> Snapshot:
            fields: dict[str, object] = {
                "conversations": conv, "session": sid, "counter": COUNTER, "task": "t",
                "include_git_log": False, "profiles": profiles, "max_tokens": 5000,
            }  # fmt: skip
            return Snapshot.build(tmp_path, window=window, **{**fields, **kw})

        first = build()
        assert build() is first  # nothing changed: the same snapshot
        # A project file rewritten (same size, 1 ns later).
        _rewrite(vision, "# Vision\n\nShip the gamma.\n")
        second = build()
        assert second is not first and second.content("vision") == "# Vision\n\nShip the gamma."
        assert second.id == build(window=None).id != first.id
        assert build() is second
        # A file created where there was none.
        (tmp_path / ".personae" / "directive.md").write_text("Be brief.\n", encoding="utf-8")
        third = build()
        assert third.content("directive") == "Be brief." and third.id == build(window=None).id
        # A message appended by another process.
        subprocess.run([sys.executable, "-c", _APPEND, str(db), sid, "from elsewhere"], check=True)
        fourth = build()
        assert fourth is not third and fourth.messages[-1].content == "from elsewhere"
        assert fourth.id == build(window=None).id and build() is fourth
        # Other options: another snapshot; the same options again: that snapshot again.
        other = build(task="u")
        assert other.content("task") == "u" and other.id == build(window=None, task="u").id
        assert build(task="u") is other
        back = build()
        assert back is not other and back.id == fourth.id and back.content("task") == "t"
        # Not static (the git log is read every turn): never the previous snapshot.
        assert build(include_git_log=True) is not build(include_git_log=True)
        # The warnings list passed again after the caller appended to it.
        notes = ["first warning"]
        warned = build(warnings=notes)
        assert build(warnings=notes) is warned and warned.warnings == ("first warning",)
        notes.append("second warning")
        again = build(warnings=notes)
        assert again.warnings == ("first warning", "second warning")
        assert again.id == build(window=None, warnings=list(notes)).id


def test_window_turn_is_the_previous_snapshot_until_messages_are_appended(tmp_path: Path) -> None:
    (tmp_path / ".personae").mkdir()
    profiles = load_profiles(tmp_path)
    window = ContextWindow([ChatMessage("user", "hello", seq=1)])

    def build() -> Snapshot:
        return Snapshot.build(
            tmp_path, task="t", include_git_log=False, profiles=profiles, window=window
        )

    first = build()
    assert build() is first
    window.extend([ChatMessage("assistant", "hi", seq=2)])
    second = build()
    assert [m.content for m in second.messages] == ["hello", "hi"]
    fresh = Snapshot.build(
        tmp_path, task="t", include_git_log=False, profiles=profiles, messages=second.messages
    )
    assert second.id == fresh.id != first.id


def test_commands_run_again_every_turn(tmp_path: Path) -> None:
    """A persona block with a ``!command`` is expanded every turn (its output may change)."""
    (tmp_path / ".personae").mkdir()
    (tmp_path / ".personae" / "config.yaml").write_text(
        "commands:\n  enabled: true\n  allow: [cat]\n", encoding="utf-8"
    )
    (tmp_path / "n.txt").write_text("one", encoding="utf-8")
    profiles = load_profiles(tmp_path)
    window = ContextWindow([ChatMessage("user", "hello", seq=1)])

    def persona() -> str | None:
        return Snapshot.build(
            tmp_path, task="t", include_git_log=False, profiles=profiles, window=window,
            persona="p", execution_block="Count: !`cat n.txt`",
        ).content("persona")  # fmt: skip

    assert persona() == "Count: one"
    (tmp_path / "n.txt").write_text("two", encoding="utf-8")
    assert persona() == "Count: two"


def test_assembled_text_sections_follow_file_counter_and_profile_changes(tmp_path: Path) -> None:
    """Text sections escaped and counted once per window are those of a fresh assembly
    after a file changes, for another counter and for another tag set."""
    from personae.context import Budget, assemble_snapshot
    from personae.context.profiles import ProfileSet
    from personae.tokens.estimate import EstimateCounter

    vision = tmp_path / ".personae" / "project" / "VISION.md"
    vision.parent.mkdir(parents=True)
    vision.write_text("# Vision\n\nShip the alpha <task> now.\n", encoding="utf-8")
    profiles = load_profiles(tmp_path)
    window = ContextWindow([ChatMessage("user", "hello", seq=1)])

    def both(counter: object, tags_of: ProfileSet | None = None) -> tuple[object, object]:
        """(render, section counts) through the window and fresh; ``tags_of``: assemble
        the same builder profile with that set's tags."""
        out = []
        for w in (window, None):
            snap = Snapshot.build(
                tmp_path, task="t", include_git_log=False, profiles=profiles, window=w
            )
            ctx = assemble_snapshot(
                snap, "builder", Budget.absolute(4000), counter,  # type: ignore[arg-type]
                profiles=tags_of, profile=profiles.get("builder"),
            )  # fmt: skip
            out.append((ctx.render(), [(s.requested, s.kept) for s in ctx.sections]))
            assert ctx.report().total == ctx.total
        return out[0], out[1]

    kept, fresh = both(COUNTER)
    assert kept == fresh and "Ship the alpha &lt;task> now." in str(kept)
    _rewrite(vision, "# Vision\n\nShip the gamma <task> now.\n")
    kept, fresh = both(COUNTER)
    assert kept == fresh and "gamma" in str(kept) and "alpha" not in str(kept)
    kept, fresh = both(EstimateCounter("claude"))
    assert kept == fresh
    # Another tag set (a profile adds a tag): '<extra>' in the vision is escaped too.
    _rewrite(vision, "# Vision\n\nShip the gamma <extra> now.\n")
    kept, _ = both(COUNTER)
    assert "<extra> now." in str(kept)
    (tmp_path / ".personae" / "profiles.yaml").write_text(
        "roles:\n  other:\n    sections:\n      - {tag: extra, source: text, text: more}\n",
        encoding="utf-8",
    )
    kept, fresh = both(COUNTER, load_profiles(tmp_path))
    assert kept == fresh and "&lt;extra> now." in str(kept)
