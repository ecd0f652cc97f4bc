"""Result artifacts of a handover run: the files the run's tools wrote, confined.

Real files, a real handover file written and read back through the run flow;
the run's tool-call events are built as the team emits them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from personae.handover import runflow
from personae.handover.create import build_handover, write_handover
from personae.team.events import Event, RunStarted, ToolCalled
from personae.team.result import files_written


def call(seq: int, tool: str, path: str, *, ok: bool = True, **extra: Any) -> Event:
    fields: dict[str, Any] = {"persona": "dev", "reused": False, "depth": None} | extra
    return ToolCalled(
        run_id="r", seq=seq, at="t", tool=tool, args={"path": path}, ok=ok, result="", **fields
    )


OUTSIDE = Path("/etc/passwd")
"""A real file outside every allowed root (the project, its handover dir, the temp dir)."""


def test_written_files_become_confined_result_artifacts(
    tmp_path: Path, isolated_home: Path
) -> None:
    root = tmp_path / "proj"
    (root / "sub").mkdir(parents=True)
    for name in ("a.md", "sub/b.md", "read.md", "failed.md"):
        (root / name).write_text(name)
    (root / "leak.md").symlink_to(OUTSIDE)
    events = [
        RunStarted(
            run_id="r",
            seq=1,
            at="t",
            task="t",
            persona=None,
            session=None,
            context_from=None,
            pid=1,
            sandbox="off",
        ),
        call(2, "write_file", "a.md"),
        call(3, "edit_file", "sub/b.md"),
        call(4, "write_file", "a.md"),  # twice: listed once
        call(5, "read_file", "read.md"),  # read, not produced
        call(6, "write_file", "failed.md", ok=False),  # failed call
        call(7, "write_file", "gone.md", depth=1),  # a sub-agent's temp file, gone now
        call(8, "write_file", "leak.md"),  # resolves outside the allowed roots
    ]
    written = files_written(events, root)
    assert written == ["a.md", "sub/b.md", "leak.md"]

    h = build_handover(source_persona="a", target_persona="b", task="t", cwd=root)
    path = write_handover(h, cwd=root).path
    session = runflow.begin(
        path, None, cwd=root, non_interactive=True, allowed_roots=[], env_allow=[]
    )
    runflow.finish(session, status="success", output="done", artifacts=written)
    results = json.loads(path.read_text())["results"]
    assert results["artifacts"] == ["a.md", "sub/b.md"]
    assert any("leak.md" in w for w in session.warnings)
