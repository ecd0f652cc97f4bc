"""Snapshot.build: fresh directive, conversation paths A/B from a real store, project files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from personae.context import Budget, ChatMessage, Snapshot, assemble_snapshot
from personae.store.conversations import ConversationStore, Message
from personae.store.db import Store
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")


def put(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def no_empty_tags(rendered: str) -> None:
    assert not re.search(r"(?m)^<([a-z_]+)>\n\s*\n?</\1>$", rendered)


def test_directive_is_read_fresh_every_turn(tmp_path: Path) -> None:
    store = Store(tmp_path / ".personae" / "state.db")
    conv = ConversationStore(store, COUNTER)
    sid = conv.create_session()
    conv.append(sid, Message("user", "first question"))
    put(tmp_path, "CLAUDE.md", "claude rules")
    put(tmp_path, "AGENTS.md", "agents rules")
    put(tmp_path, ".personae/directive.md", "Never deploy on Fridays.")

    def turn() -> str:
        snap = _turn(tmp_path, conv, sid)
        return assemble_snapshot(snap, "manager", Budget.absolute(3000), COUNTER).render()

    assert "Never deploy on Fridays." in turn()
    put(tmp_path, ".personae/directive.md", "Deploy only with a second reviewer.")
    conv.append(sid, Message("assistant", "ok"))
    second = turn()
    assert "Deploy only with a second reviewer." in second and "Fridays" not in second
    (tmp_path / ".personae" / "directive.md").unlink()
    assert "agents rules" in turn()
    (tmp_path / "AGENTS.md").unlink()
    assert "claude rules" in turn()
    (tmp_path / "CLAUDE.md").unlink()
    assert "<directive>" not in turn()
    store.close()


def _session(tmp_path: Path, turns: int) -> tuple[Store, ConversationStore, str]:
    store = Store(tmp_path / "state.db")
    conv = ConversationStore(store, COUNTER)
    sid = conv.create_session(title="demo")
    for t in range(turns):
        conv.append(sid, Message("user", f"question {t}"))
        conv.append(
            sid,
            Message(
                "assistant",
                f"checking {t}",
                tool_calls=[{"id": f"c{t}", "name": "grep", "args": {"q": str(t)}}],
            ),
        )
        conv.append(sid, Message("tool", f"result {t}", tool_call_id=f"c{t}"))
        conv.append(sid, Message("assistant", f"answer {t}"))
    return store, conv, sid


def _turn(
    root: Path,
    conv: ConversationStore,
    sid: str,
    summarizer: Callable[[str | None, Sequence[ChatMessage]], str] | None = None,
) -> Snapshot:
    """The snapshot of one turn (task "t", no git log) of session ``sid`` in ``conv``, with
    ``summarizer`` (``None``: none, path B)."""
    return Snapshot.build(
        root,
        conversations=conv,
        session=sid,
        summarizer=summarizer,
        task="t",
        include_git_log=False,
    )


def test_path_b_trims_when_there_is_no_summarizer(tmp_path: Path) -> None:
    store, conv, sid = _session(tmp_path, 20)
    snap = _turn(tmp_path, conv, sid)
    assert snap.history_path == "B"
    ctx = assemble_snapshot(snap, "worker", Budget.absolute(4000), COUNTER)
    report = ctx.report()
    assert report.history_path == "B"
    assert ctx.messages[-1].content == "answer 19"
    assert ctx.messages[0].role != "tool"
    assert "earlier messages omitted" in ctx.render()
    assert "conversation_summary" not in ctx.render()
    assert len(snap.messages) < 80  # only the tail was read
    store.close()


def test_path_a_folds_into_a_stored_running_summary(tmp_path: Path) -> None:
    store, conv, sid = _session(tmp_path, 10)
    calls: list[tuple[str | None, int]] = []

    def summarizer(previous: str | None, new: Sequence[ChatMessage]) -> str:
        calls.append((previous, len(new)))
        answers = [m.content for m in new if m.role == "assistant" and not m.tool_calls]
        return (previous + "; " if previous else "Summary: ") + ", ".join(answers)

    snap = _turn(tmp_path, conv, sid, summarizer)
    assert snap.history_path == "A"
    assert len(calls) == 1 and calls[0][0] is None
    saved = conv.latest_summary(sid)
    assert saved is not None and saved.text.startswith("Summary: answer 0")
    assert saved.covers_seq == snap.messages[0].seq - 1
    ctx = assemble_snapshot(snap, "client", Budget.absolute(4000), COUNTER)
    assert ctx.report().history_path == "A"
    assert "<conversation_summary>\nSummary: answer 0" in ctx.render()
    assert "earlier messages omitted" not in ctx.render()
    # Next turn with nothing new: the summary is reused, not recomputed.
    _turn(tmp_path, conv, sid, summarizer)
    assert len(calls) == 1
    conv.append(sid, Message("user", "one more"))
    conv.append(sid, Message("assistant", "answer 10"))
    conv.append(sid, Message("user", "and another"))
    _turn(tmp_path, conv, sid, summarizer)
    assert len(calls) == 2 and calls[1][0] == saved.text
    store.close()


def test_a_failing_summarizer_falls_back_to_path_b(tmp_path: Path) -> None:
    store, conv, sid = _session(tmp_path, 10)

    def broken(previous: str | None, new: Sequence[ChatMessage]) -> str:
        raise TimeoutError("model timed out")

    snap = _turn(tmp_path, conv, sid, broken)
    report = assemble_snapshot(snap, "worker", Budget.absolute(3000), COUNTER).report()
    assert report.history_path == "B"
    assert report.warnings == [
        "summarizer failed (TimeoutError: model timed out); used path B (trim only)"
    ]
    assert "Warning:" in report.to_text()
    assert conv.latest_summary(sid) is None
    store.close()


def project(root: Path) -> None:
    base = ".personae/project/"
    put(root, base + "VISION.md", "# Social app\nCreators share short videos.")
    put(root, base + "GAMEPLAN.md", "# Gameplan\n1. Setup\n2. Core features")
    put(root, base + "STATE.md", "# State\nCurrent step: 02-profile")
    put(root, base + "goals/01-setup/01-db/STEP.md", "# Step 1: DB\nStatus: done\n")
    put(
        root,
        base + "goals/01-setup/02-profile/STEP.md",
        "# Step 2: Profiles\nBuild profile pages.\n\n## Decisions\n\n### Locked\n- Use Supabase\n\n"
        "### Flexible\n- Styling\n\n### Deferred\n- Dark mode\n\n## Notes\nKeep it simple.\n",
    )
    put(root, base + "goals/01-setup/02-profile/RESEARCH.md", "Avatar storage options.")
    put(
        root,
        base + "tasks/profile-page.md",
        "## Build the user profile page\n**Files:** src/pages/Profile.tsx",
    )
    for name in ("CONVENTIONS", "STRUCTURE", "ARCHITECTURE", "TESTING", "SUMMARY"):
        put(root, base + f"codebase/{name}.md", f"codebase {name} doc")
    for name in ("FEATURES", "STACK", "PITFALLS", "SUMMARY"):
        put(root, base + f"research/{name}.md", f"research {name} doc")


@pytest.mark.parametrize(
    ("task", "kind", "code", "not_code"),
    [
        ("profile-page", "ui", ["CONVENTIONS", "STRUCTURE"], ["ARCHITECTURE", "TESTING"]),
        (
            "Add a REST endpoint for the feed query",
            "api",
            ["ARCHITECTURE", "CONVENTIONS"],
            ["STRUCTURE"],
        ),
        (
            "Write unit test coverage for the feed",
            "testing",
            ["TESTING", "CONVENTIONS"],
            ["STRUCTURE"],
        ),
        (
            "Rename the project",
            "general",
            ["CONVENTIONS"],
            ["STRUCTURE", "ARCHITECTURE", "TESTING"],
        ),
    ],
)
def test_project_files_and_task_type_selection(
    tmp_path: Path, task: str, kind: str, code: list[str], not_code: list[str]
) -> None:
    project(tmp_path)
    snap = Snapshot.build(tmp_path, task=task, include_git_log=False)
    assert snap.task_type == kind
    rendered = assemble_snapshot(snap, "builder", Budget.absolute(8000), COUNTER).render()
    no_empty_tags(rendered)
    codebase = re.search(r"(?s)<codebase>\n(.*?)\n</codebase>", rendered)
    assert codebase is not None
    for name in code:
        assert f"codebase {name} doc" in codebase.group(1)
    for name in not_code:
        assert f"codebase {name} doc" not in codebase.group(1)
    assert "<vision>\n# Social app" in rendered
    step = re.search(r"(?s)<current_step>\n(.*?)\n</current_step>", rendered)
    assert (
        step is not None and "Step 2: Profiles" in step.group(1) and "Locked" not in step.group(1)
    )
    decisions = re.search(r"(?s)<decisions>\n(.*?)\n</decisions>", rendered)
    assert (
        decisions is not None
        and "- Use Supabase" in decisions.group(1)
        and "RULES:" in decisions.group(1)
    )
    if task == "profile-page":
        assert "<task>\n## Build the user profile page" in rendered
    planner = assemble_snapshot(snap, "planner", Budget.absolute(8000), COUNTER).render()
    assert (
        "<gameplan>" in planner and "<project_state>" in planner and "<research_summary>" in planner
    )
    assert "<current_step>" not in planner
    verifier = assemble_snapshot(snap, "verifier", Budget.absolute(8000), COUNTER).render()
    assert "Locked" in verifier  # no decisions tag here, so the step keeps them


def test_missing_files_are_skipped_silently(tmp_path: Path) -> None:
    put(tmp_path, ".personae/project/VISION.md", "# Only a vision")
    put(tmp_path, ".personae/project/GAMEPLAN.md", "   \n")
    snap = Snapshot.build(tmp_path, task="x", include_git_log=False)
    for role in ("builder", "planner", "inspector", "mapper"):
        rendered = assemble_snapshot(snap, role, Budget.absolute(4000), COUNTER).render()
        no_empty_tags(rendered)
        assert "<gameplan>" not in rendered


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
@pytest.mark.process
def test_recent_changes_come_from_git_log(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@x",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@x",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, env=env)
    for msg in ("Add login page", "Add signup page"):
        (tmp_path / "f.txt").write_text(msg, encoding="utf-8")
        subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", msg], check=True, env=env)
    project(tmp_path)
    rendered = assemble_snapshot(
        Snapshot.build(tmp_path, task="t"), "builder", Budget.absolute(8000), COUNTER
    ).render()
    changes = re.search(r"(?s)<recent_changes>\n(.*?)\n</recent_changes>", rendered)
    assert changes is not None
    assert changes.group(1).index("Add signup page") < changes.group(1).index("Add login page")
    # most volatile last, only the instructions after it (instructions last)
    assert rendered.rstrip().endswith("</instructions>")
    assert rendered.rindex("</recent_changes>") > rendered.rindex("</task>")


def test_no_git_repository_means_no_recent_changes(tmp_path: Path) -> None:
    project(tmp_path)
    (tmp_path / ".git").write_text(
        "not a repository", encoding="utf-8"
    )  # stops git's search upward
    rendered = assemble_snapshot(
        Snapshot.build(tmp_path, task="t"), "builder", Budget.absolute(8000), COUNTER
    ).render()
    assert "<recent_changes>" not in rendered


def _with_commands(root: Path, config: str, text: str) -> str:
    put(root, ".personae/config.yaml", config)
    put(
        root,
        ".personae/profiles.yaml",
        "roles:\n  worker:\n    sections:\n      - tag: instructions\n"
        f"        text: {text!r}\n      - task\n",
    )
    snap = Snapshot.build(root, task="t", include_git_log=False)
    return assemble_snapshot(snap, "worker", Budget.absolute(4000), COUNTER).render()


def test_commands_run_only_when_enabled_and_allowed(tmp_path: Path) -> None:
    text = "Greeting: !`echo hello world`\nState: !printf hi"
    off = _with_commands(tmp_path, "commands: {enabled: false, allow: [echo]}\n", text)
    assert "[command not run: commands are disabled" in off and "hello world" not in off
    assert "State: !printf hi" in off  # a bare form that may not run stays as written
    on = _with_commands(tmp_path, "commands: {enabled: true, allow: [echo]}\n", text)
    assert "Greeting: hello world" in on and "State: !printf hi" in on
    both = _with_commands(tmp_path, "commands: {enabled: true, allow: [echo, printf]}\n", text)
    assert "State: hi" in both
    refused = _with_commands(
        tmp_path, "commands: {enabled: true, allow: [echo]}\n", "X !`cat /etc/passwd`"
    )
    assert "'cat' is not in commands.allow" in refused and "root:" not in refused


def test_commands_have_no_shell_a_timeout_and_an_output_cap(tmp_path: Path) -> None:
    noshell = _with_commands(
        tmp_path, "commands: {enabled: true, allow: [echo]}\n", "!`echo a; touch pwned`"
    )
    assert "a; touch pwned" in noshell and not (tmp_path / "pwned").exists()
    slow = _with_commands(
        tmp_path, "commands: {enabled: true, allow: [sleep], timeout: 0.3}\n", "!`sleep 5`"
    )
    assert "timed out after 0.3s" in slow
    big = _with_commands(
        tmp_path, "commands: {enabled: true, allow: [seq], max_output: 40}\n", "!`seq 1 100000`"
    )
    assert "[output cut:" in big and "99999" not in big


def test_commands_never_run_for_handover_personas(tmp_path: Path) -> None:
    put(tmp_path, ".personae/config.yaml", "commands: {enabled: true, allow: [touch]}\n")
    block = "Setup: !`touch marker`"
    snap = Snapshot.build(
        tmp_path, execution_block=block, persona_from_handover=True, task="t", include_git_log=False
    )
    assert not (tmp_path / "marker").exists()
    assert "text came from a handover" in snap.texts["persona"]
    Snapshot.build(tmp_path, execution_block=block, task="t", include_git_log=False)
    assert (tmp_path / "marker").exists()  # the same text from the project's own cast does run


def test_snapshot_id_is_a_content_hash(tmp_path: Path) -> None:
    put(tmp_path, "AGENTS.md", "rules v1")
    a = Snapshot.build(tmp_path, task="t", include_git_log=False)
    b = Snapshot.build(tmp_path, task="t", include_git_log=False)
    assert a.id == b.id and len(a.id) == 16
    put(tmp_path, "AGENTS.md", "rules v2")
    assert Snapshot.build(tmp_path, task="t", include_git_log=False).id != a.id
    assert (
        assemble_snapshot(a, "worker", Budget.absolute(500), COUNTER).report().snapshot_id == a.id
    )


def test_bad_inputs(tmp_path: Path) -> None:
    from personae.errors import ConfigError, UnknownNameError

    put(tmp_path, ".personae/directive.md", "x")
    (tmp_path / ".personae" / "directive.md").write_bytes(b"\xff\xfe bad")
    with pytest.raises(ConfigError, match=r"directive\.md: not UTF-8"):
        Snapshot.build(tmp_path, include_git_log=False)
    (tmp_path / ".personae" / "directive.md").unlink()
    project(tmp_path)
    with pytest.raises(ConfigError, match="no step '09-nope'"):
        Snapshot.build(tmp_path, step="09-nope", include_git_log=False)
    snap = Snapshot.build(tmp_path, include_git_log=False)
    with pytest.raises(UnknownNameError, match="did you mean 'builder'"):
        assemble_snapshot(snap, "buildr", Budget.absolute(100), COUNTER)
    store = Store(tmp_path / "s.db")
    with pytest.raises(UnknownNameError, match="unknown session"):
        Snapshot.build(tmp_path, conversations=ConversationStore(store, COUNTER), session="nope")
    store.close()
