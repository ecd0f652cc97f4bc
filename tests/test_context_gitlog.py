"""Recent commits: read only for a role that shows them, once per commit."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from personae.context import Budget, Snapshot, assemble_snapshot
from personae.context.gitlog import _run, git_log, head_commit
from personae.context.snapshot import SnapshotOptions
from personae.team.turn_context import TurnContext
from personae.tokens.exact import exact_counter

COUNTER = exact_counter("o200k_base")
GIT = shutil.which("git")
ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@x",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@x",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "PATH": os.environ["PATH"],
}


def _git(root: Path, *args: str) -> str:
    assert GIT is not None, "git is needed by these tests"
    out = subprocess.run([GIT, *args], cwd=root, check=True, env=ENV, capture_output=True)
    return out.stdout.decode()


def _commit(root: Path, msg: str) -> None:
    (root / "f.txt").write_text(msg, encoding="utf-8")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", msg)


@pytest.fixture
def counting_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``git`` first on PATH that counts its runs in a file and prints one commit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    runs = tmp_path / "runs.txt"
    script = bin_dir / "git"
    script.write_text(
        f"#!/bin/sh\necho run >> {runs}\necho '- 2026-11-27 counted commit (abc1234)'\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return runs


def _runs(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


@pytest.mark.process
def test_git_log_runs_only_for_a_role_that_shows_it(tmp_path: Path, counting_git: Path) -> None:
    root = tmp_path / "p"
    (root / ".personae").mkdir(parents=True)
    (root / ".git").write_text("not a repository")  # no HEAD to read: git would run
    quiet = Snapshot.build(root, task="t", roles=("manager", "worker", "validator"))
    assert _runs(counting_git) == 0 and "git_log" not in quiet.texts
    shown = Snapshot.build(root, task="t", roles=("worker", "builder"))
    assert _runs(counting_git) == 1 and "counted commit" in shown.texts["git_log"]
    text = assemble_snapshot(shown, "builder", Budget.absolute(4000), COUNTER).render()
    assert "<recent_changes>" in text
    Snapshot.build(root, task="t")  # no roles named: read as asked
    assert _runs(counting_git) == 2
    Snapshot.build(root, task="t", roles=("builder",), include_git_log=False)
    assert _runs(counting_git) == 2


def test_the_team_turn_reads_it_only_with_a_profile_that_shows_it(
    tmp_path: Path, counting_git: Path
) -> None:
    root = tmp_path / "p"
    (root / ".personae").mkdir(parents=True)
    (root / ".git").write_text("not a repository")
    TurnContext.build(root, SnapshotOptions(task="t"), counter=COUNTER)
    assert _runs(counting_git) == 0
    turn = TurnContext.build(root, SnapshotOptions(task="t"), counter=COUNTER, profile="builder")
    assert _runs(counting_git) == 1
    assert "counted commit" in turn.view("worker").text


def test_the_log_is_read_again_only_when_head_moves(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, "Add login page")
    first = git_log(tmp_path)
    assert first is not None and "Add login page" in first
    assert git_log(tmp_path) is first  # remembered by commit
    _commit(tmp_path, "Add signup page")
    second = git_log(tmp_path)
    assert second == _run(tmp_path, 15, 3.0)
    assert second is not None and second.index("signup") < second.index("login")
    # Packed refs, a detached HEAD and a linked worktree resolve to the same commit git sees.
    _git(tmp_path, "pack-refs", "--all")
    head = _git(tmp_path, "rev-parse", "HEAD").strip()
    assert head_commit(tmp_path) == (str(tmp_path / ".git"), head)
    _git(tmp_path, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    assert head_commit(tmp_path / "wt") is not None
    assert head_commit(tmp_path / "wt")[1] == head  # type: ignore[index]
    _commit(tmp_path / "wt", "Side work")
    side = git_log(tmp_path / "wt")
    assert side is not None and "Side work" in side and "Side work" not in (git_log(tmp_path) or "")
    _git(tmp_path, "checkout", "-q", "--detach", "HEAD~1")
    assert git_log(tmp_path) == _run(tmp_path, 15, 3.0)
    assert "signup" not in (git_log(tmp_path) or "")


def test_unborn_branch_and_no_repository(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    assert head_commit(tmp_path) is None and git_log(tmp_path) is None
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / ".git").write_text("not a repository")
    assert git_log(plain) is None
