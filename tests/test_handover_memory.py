"""`context.memorySnapshot`: the project's memory catalog, summarised, never secrets.

Real memory files on disk; the CLI case runs `personae handover create` as a
subprocess and reads the written handover file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from personae.handover._memory import MAX_CHARS, memory_snapshot
from personae.handover.create import build_handover
from personae.handover.runflow import begin

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def memory_file(folder: Path, name: str, mtype: str, description: str, body: str) -> None:
    text = f"---\nname: {name[:-3]}\ndescription: {description}\ntype: {mtype}\n---\n{body}\n"
    (folder / name).write_text(text)


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path) -> Path:
    root = tmp_path / "proj"
    folder = root / ".personae" / "memory"
    folder.mkdir(parents=True)
    memory_file(folder, "prefs.md", "user", "Prefers short answers", "BODY-PREFS")
    memory_file(folder, "style.md", "feedback", "No emojis in reports", "BODY-STYLE")
    memory_file(folder, "deploy.md", "project", "Deploys on Fridays", "BODY-DEPLOY")
    memory_file(folder, "keys.md", "project", f"The key is {SECRET}", f"token {SECRET}")
    memory_file(folder, "api_key.md", "reference", "where the key lives", "BODY-KEY")
    (folder / "MEMORY.md").write_text("- [prefs](prefs.md) short answers\n")
    (folder / "notes.txt").write_text("not a memory file")
    return root


def test_snapshot_counts_by_type_without_bodies_or_secrets(project: Path) -> None:
    text = memory_snapshot(project)
    assert text is not None
    first = text.splitlines()[0]
    assert "5 file(s)" in first
    assert "by type: feedback 1, project 2, reference 1, user 1." in first
    assert "- prefs.md [user]: Prefers short answers" in text
    assert "- deploy.md [project]: Deploys on Fridays" in text
    assert "BODY-" not in text  # no file bodies
    assert SECRET not in text and "sk-proj" not in text
    assert "- keys.md [project]: (description withheld" in text
    assert "- api_key.md [reference]: (description withheld" in text
    assert "MEMORY.md" not in text and "notes.txt" not in text


def test_no_memory_folder_leaves_it_empty(tmp_path: Path) -> None:
    assert memory_snapshot(tmp_path) is None
    h = build_handover(source_persona="a", target_persona="b", task="t", cwd=tmp_path)
    assert h.context.memory_snapshot is None
    assert "memorySnapshot" not in h.model_dump_json(by_alias=True)


def test_snapshot_stays_small(tmp_path: Path) -> None:
    folder = tmp_path / ".personae" / "memory"
    folder.mkdir(parents=True)
    for i in range(300):
        memory_file(folder, f"m{i:03d}.md", "project" if i % 2 else "user", "x" * 400, "b")
    text = memory_snapshot(tmp_path)
    assert text is not None and len(text) <= MAX_CHARS
    assert "300 file(s); by type: project 150, user 150." in text
    assert "... and 280 more" in text or text.endswith("…")


@pytest.mark.process
def test_handover_carries_it_and_the_receiver_sees_it(project: Path) -> None:
    h = build_handover(source_persona="a", target_persona="b", task="t", cwd=project)
    assert h.context.memory_snapshot == memory_snapshot(project)
    out = project / "h.json"
    done = subprocess.run(
        [sys.executable, "-m", "personae", "handover", "create", "--to", "researcher",
         "--task", "Write it", "--out", str(out)],
        check=False, cwd=project, capture_output=True, text=True, timeout=120,
        env=os.environ.copy(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(out.read_text())
    snapshot = body["context"]["memorySnapshot"]
    assert "5 file(s)" in snapshot and SECRET not in out.read_text()
    session = begin(out, None, cwd=project, non_interactive=True, ledger_db=None)
    assert "Source memory (summary):" in session.section_text
    assert "Deploys on Fridays" in session.section_text
