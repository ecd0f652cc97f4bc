"""Per-turn work that follows what changed: exact counts by groups, remembered file reads."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from personae.context import ContextWindow, Snapshot
from personae.context._counted import render_counted
from personae.context.fit import SectionContent, fit
from personae.context.render import render_sections
from personae.context.spec import SectionSource, SectionSpec
from personae.tokens.exact import exact_counter

PIECES = st.sampled_from(
    ["\n\n", "\n", " ", "  \n\n", "<task>", "</task>", "###", "[note]", "#", "<", "[", "x",
     "日本語", "word.", "  ", "\t", "\r\n", "123", "/", ">", "\n\n<", "\n\n#", "\n\n[", "'s",
     "### user\nhello", "[3 earlier messages omitted]", ""]
)  # fmt: skip
BLOCK = st.lists(PIECES, max_size=8).map("".join)
SECTIONS = st.lists(
    st.tuples(st.sampled_from(["task", "recent_messages", "a_b"]), st.lists(BLOCK, max_size=6)),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(first=SECTIONS, second=SECTIONS)
def test_counted_render_is_the_render_and_its_exact_count(
    first: list[tuple[str, list[str]]], second: list[tuple[str, list[str]]]
) -> None:
    """Same text as render_sections; the count equals the whole-text count, also when
    the next prompt reuses groups of the previous one (both encodings)."""
    for name in ("o200k_base", "cl100k_base"):
        counter = exact_counter(name)
        for sections in (first, second, first, [*first, *second]):
            rendered, total = render_counted(counter, sections)
            joined = [(tag, "\n\n".join(pieces or [""])) for tag, pieces in sections]
            assert rendered == render_sections(joined)
            assert total == counter.count(rendered)
            # Not remembered: the same prompt and count, rendered and counted anew.
            assert render_counted(counter, sections, remember_prompt=False) == (rendered, total)


def test_a_prompt_kept_again_is_not_rendered_again() -> None:
    """A fitting that keeps what an earlier one kept (equal pieces, other string
    objects) gets the remembered prompt back; a changed piece or tag gets its own."""
    counter = exact_counter("o200k_base")
    pieces = ["### user\nfix the login", "### assistant\nreading auth.py"]
    first = render_counted(counter, [("task", ["fix it"]), ("recent_messages", pieces)])
    equal = [p.encode().decode() for p in pieces]  # equal strings, not the same objects
    assert all(a is not b for a, b in zip(equal, pieces, strict=True))
    again = render_counted(counter, [("task", ["fix it"]), ("recent_messages", equal)])
    assert again[0] is first[0] and again[1] == first[1]
    for sections in (
        [("task", ["fix it"]), ("recent_messages", [pieces[0], "### assistant\nreading db.py"])],
        [("task", ["fix it"]), ("messages", pieces)],
        [("task", ["fix it"]), ("recent_messages", pieces[:1])],
    ):
        rendered, total = render_counted(counter, sections)
        joined = [(tag, "\n\n".join(p)) for tag, p in sections]
        assert rendered == render_sections(joined) != first[0]
        assert total == counter.count(rendered)


def test_a_text_section_is_started_once_per_counter() -> None:
    """The fitting of the same text section content again starts from what its first
    fitting found (its counts, floor and rule), per counter: each counter's counts."""
    spec = SectionSpec(tag="notes", source=SectionSource.TEXT, text="x", priority=10)
    text = "Read the notes first. 日本語のテキストと中文内容混合在一起。" * 10
    counters = [exact_counter("o200k_base"), exact_counter("cl100k_base")]
    assert counters[0].count(text) != counters[1].count(text)  # each counter's own counts
    content = SectionContent(spec, text=text)  # no stored count: the counter counts it
    for budget in (10_000, 20, 10_000, 25):
        for counter in counters:
            got = fit([content], budget, counter)
            (section,) = got.sections
            assert section.requested == counter.count(text)
            assert got.total == counter.count(got.rendered) <= budget
            assert (section.rule == "full") == (budget >= 10_000)
            # What a content object met for the first time gets (nothing remembered).
            (anew,) = fit([SectionContent(spec, text=text)], budget, counter).sections
            assert section == anew and section is not anew
            assert sorted(vars(section)) == sorted(vars(anew))  # the fields, no more


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_project_reads_are_reused_only_while_nothing_changed(tmp_path: Path) -> None:
    """A step, task file or reference doc added (or removed) between turns is seen next turn."""
    project = tmp_path / ".personae" / "project"
    _write(project / "VISION.md", "the vision")

    window = ContextWindow()  # the session's: file reads are remembered in it

    def build(task: str = "fix-login") -> Snapshot:
        return Snapshot.build(tmp_path, task=task, include_git_log=False, window=window)

    first = build()
    assert first.texts["vision"] == "the vision"
    assert "step" not in first.texts and first.texts["task"] == "fix-login"
    assert build().id == first.id  # nothing changed: same content, same id

    _write(project / "goals" / "01-auth" / "01-login" / "STEP.md", "# Login\n\nStatus: open")
    assert "# Login" in build().texts["step"]

    _write(project / "goals" / "01-auth" / "01-login" / "tasks" / "fix-login.md", "Do the fix")
    with_task = build()
    assert with_task.texts["task"] == "Do the fix"
    assert with_task.files["task"].endswith("fix-login.md")

    _write(project / "reference" / "api.md", "endpoint docs")
    assert "endpoint docs" in build().texts["reference"]

    (project / "reference" / "api.md").unlink()
    (project / "goals" / "01-auth" / "01-login" / "tasks" / "fix-login.md").unlink()
    later = build()
    assert "reference" not in later.texts and later.texts["task"] == "fix-login"
    _write(project / "VISION.md", "the new vision")
    assert build().texts["vision"] == "the new vision"
    assert window.files  # the reads were remembered in the session's window, nowhere else


def test_files_under_folders_that_were_missing_are_seen_once_created(tmp_path: Path) -> None:
    """Paths under a missing folder are not stat'ed again while it stays missing; once
    the folder appears with files in it, the next turn reads them."""
    window = ContextWindow()

    def build() -> Snapshot:
        return Snapshot.build(tmp_path, task="t", include_git_log=False, window=window)

    first = build()
    assert "step" not in first.texts and "directive" not in first.texts
    assert build().id == first.id
    project = tmp_path / ".personae" / "project"
    _write(project / "goals" / "01-auth" / "01-login" / "STEP.md", "# Login\n\nStatus: open")
    _write(project / "codebase" / "STACK.md", "python and sqlite")
    after = build()
    assert "# Login" in after.texts["step"]
    assert any("python and sqlite" in v for v in after.texts.values())
    _write(tmp_path / ".personae" / "directive.md", "be brief")
    assert build().texts["directive"] == "be brief"


def test_missing_paths_are_checked_as_a_stat_would_see_them(tmp_path: Path) -> None:
    """The cheap existence check of paths recorded missing agrees with stat, following
    symlinks or not (a dangling link exists for lstat only)."""
    from personae.context._probe import _exists, _ident

    (tmp_path / "file").write_text("x", encoding="utf-8")
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "link").symlink_to(tmp_path / "file")
    cases = ["file", "dir", "missing", "dangling", "link", "file/under", "dir/none", "a\x00b"]
    for name in cases:
        where = str(tmp_path / name)
        for follow in (True, False):
            assert _exists(where, follow) == (_ident(where, follow) is not None), (name, follow)


def _settle(root: Path) -> None:
    """Everything under ``root`` last changed an hour ago (links themselves, not targets)."""
    old = time.time_ns() - 3600 * 10**9
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            os.utime(os.path.join(folder, name), ns=(old, old), follow_symlinks=False)
    os.utime(root, ns=(old, old))


def _shown(snap: Snapshot, text: str) -> bool:
    return any(text in value for value in snap.texts.values())


def test_paths_missing_in_a_settled_folder_are_seen_once_created(tmp_path: Path) -> None:
    """A path found missing in a folder last changed long ago is covered by the folder's
    stat, not checked on its own: a file created there later changes the folder's time and
    is read next turn. A link put there whose target appears later (elsewhere: the folder
    does not change) is seen too, and so is a file created in a folder changed just
    before it (in the same timestamp step: the folder's time does not move)."""
    project = tmp_path / ".personae" / "project"
    codebase, research = project / "codebase", project / "research"
    _write(codebase / "STACK.md", "python")
    _write(research / "SUMMARY.md", "the research")
    _settle(tmp_path)
    window = ContextWindow()

    def build() -> Snapshot:
        return Snapshot.build(tmp_path, task="t", include_git_log=False, window=window)

    assert _shown(build(), "python") and not _shown(build(), "pytest")
    covered = {e[0] for bundle in window.files.values() for e in bundle[0] if e[4]}
    assert str(codebase / "TESTING.md") in covered  # what this test is about
    _write(codebase / "TESTING.md", "pytest")
    assert _shown(build(), "pytest")

    elsewhere = tmp_path / "conventions.md"
    (codebase / "CONVENTIONS.md").symlink_to(elsewhere)
    _settle(tmp_path)
    assert not _shown(build(), "tabs, not spaces")
    elsewhere.write_text("tabs, not spaces", encoding="utf-8")
    assert _shown(build(), "tabs, not spaces")

    _write(research / "SUMMARY.md", "the research, again")  # the folder is young now
    (research / "SUMMARY.md").unlink()
    _write(research / "SUMMARY.md", "the research, later")
    assert _shown(build(), "the research, later")
    before = os.stat(research)
    _write(research / "FEATURES.md", "the feature list")
    os.utime(research, ns=(before.st_atime_ns, before.st_mtime_ns))  # the same step
    assert _shown(build(), "the feature list")


def test_a_path_probed_both_ways_is_stat_ed_once_unless_it_is_a_link(tmp_path: Path) -> None:
    """A path probed with and without following links (a config file that may be a link)
    is stat'ed once when it is not a link; a link is followed too, so a change of its
    target is seen, and a file replaced by a link is seen."""
    from personae.context._probe import probe, remembered

    target, link, plain = tmp_path / "target", tmp_path / "link", tmp_path / "plain"
    target.write_text("a", encoding="utf-8")
    link.symlink_to(target)
    plain.write_text("p", encoding="utf-8")
    memo: dict[object, object] = {}
    computed: list[int] = []

    def compute() -> int:
        for path in (link, plain):
            probe(path, follow=False)
            probe(path)
        computed.append(1)
        return len(computed)

    def read() -> int:
        return remembered(memo, "bundle", compute)

    assert read() == read() == 1  # nothing changed: not computed again
    target.write_text("longer", encoding="utf-8")  # the link did not change, its target did
    assert read() == read() == 2
    plain.write_text("a longer text", encoding="utf-8")
    assert read() == read() == 3
    plain.unlink()
    plain.symlink_to(target)
    assert read() == read() == 4
    target.write_text("longer still", encoding="utf-8")
    assert read() == 5
