"""Every command run outside a project writes nothing in that folder.

It either refuses with one ``personae: error:`` line naming the fix (``personae init``),
or only reads; the mind (``serve``, the hook gate) keeps its files in the user's data
folder, which never marks a project. Run in a folder below a home that holds the
default data folder ``~/.personae``, as a new user would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from _helpers import personae_cli
from personae.layout import Layout, find_root

REFUSED = "no personae project in"

WORKFLOW = """name: two-steps
steps:
  - id: first
    persona: researcher
    task: Read the notes
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder holding the default data folder ``~/.personae`` (no PERSONAE_HOME)."""
    folder = tmp_path / "home"
    (folder / ".personae").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("PERSONAE_HOME", raising=False)
    monkeypatch.delenv("PERSONAE_HANDOVER_DIR", raising=False)
    return folder


@pytest.fixture
def folder(home: Path) -> Path:
    """A folder of notes below home, no project anywhere above it."""
    notes = home / "notes"
    notes.mkdir()
    (notes / "wf.yaml").write_text(WORKFLOW, encoding="utf-8")
    (notes / "tasks.jsonl").write_text('{"task": "Read the notes"}\n', encoding="utf-8")
    (notes / "notes.md").write_text("# notes\n", encoding="utf-8")
    assert find_root(notes) is None
    return notes


def _tree(top: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(top)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(top.rglob("*"))
    }


# (arguments, exit code, text of the one stderr line or None when the command only reads)
REFUSING = [
    (["run", "hi", "--model", "openai:gpt-4o"], 1),
    (["handover", "create", "--to", "researcher", "--task", "Read the notes"], 1),
    (["handover", "create", "--to", "researcher", "--task", "x", "--handover-dir", "hd"], 1),
    (["chain", "run", "wf.yaml"], 1),
    (["batch", "tasks.jsonl"], 1),
    (["batch", "tasks.jsonl", "--root", "."], 1),
    (["hosts", "render", "--write"], 1),
]
READING = [
    (["context", "build", "--role", "worker"], 0),
    (["context", "report", "--role", "worker"], 0),
    (["context", "roles"], 0),
    (["personas", "list"], 0),
    (["personas", "check"], 0),
    (["personas", "show", "researcher"], 0),
    (["personas", "export", "researcher", "--format", "claude-code"], 0),
    (["hosts", "render"], 0),
    (["hosts", "check"], 1),
    (["handover", "ledger"], 0),
    (["runs", "list"], 0),
    (["chain", "status", "wf.yaml"], None),
    (["doctor", "--no-probe"], None),
]


@pytest.mark.parametrize(
    ("args", "code"), REFUSING, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v)
)
def test_commands_that_store_refuse_in_one_line(
    home: Path, folder: Path, args: list[str], code: int
) -> None:
    before = _tree(home)
    done = personae_cli(*args, cwd=folder)
    assert done.returncode == code, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith(f"personae: error: {REFUSED} {folder.resolve()}")
    assert "run 'personae init'" in lines[0] and "nothing was written" in lines[0]
    assert _tree(home) == before


@pytest.mark.parametrize(
    ("args", "code"), READING, ids=lambda v: " ".join(v) if isinstance(v, list) else str(v)
)
def test_commands_that_read_write_nothing(
    home: Path, folder: Path, args: list[str], code: int | None
) -> None:
    before = _tree(home)
    done = personae_cli(*args, cwd=folder)
    if code is not None:
        assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    assert _tree(home) == before


def test_a_named_root_outside_any_project_is_refused_too(home: Path, folder: Path) -> None:
    before = _tree(home)
    done = personae_cli("hosts", "render", "--write", "--root", str(folder), cwd=home)
    assert done.returncode == 1
    assert done.stderr.startswith(f"personae: error: {REFUSED} {folder.resolve()}")
    assert _tree(home) == before


@pytest.mark.process  # the gate runs as the host runs it: a child process
def test_the_hook_gate_claims_in_the_data_folder(home: Path, folder: Path) -> None:
    """The gate outside a project looks for its store in ``~/.personae`` (where ``serve``
    keeps it there) and never creates one in the folder the host works in."""
    before = _tree(folder)
    call = {
        "hook_event_name": "PreToolUse", "session_id": "s-1", "tool_use_id": "call-1",
        "tool_name": "mcp__personae__bootstrap_session", "tool_input": {}, "cwd": str(folder),
    }  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "personae", "hook", "pre-tool-use"],
        input=json.dumps(call), capture_output=True, text=True, cwd=folder, timeout=60, check=False,
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _tree(folder) == before
    # the store the gate claims in is the one `serve` started there uses
    assert Layout.for_mind(folder).state_db == home / ".personae" / "state.db"
    (folder / ".personae").mkdir()
    assert Layout.for_mind(folder).state_db == folder / ".personae" / "state.db"


@pytest.mark.process
def test_serve_outside_a_project_keeps_the_mind_in_the_data_folder(
    home: Path, folder: Path
) -> None:
    before = _tree(folder)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "personae", "serve"], cwd=str(folder),
        env={**os.environ, "HOME": str(home)},
    )  # fmt: skip

    async def main() -> bool:
        with anyio.fail_after(90), open(home / "serve.log", "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                result = await session.call_tool("bootstrap_session", {"session_id": "s-1"})
                return not result.is_error

    assert anyio.run(main)
    assert _tree(folder) == before
    assert (home / ".personae" / "state.db").is_file()
    assert find_root(folder) is None


@pytest.mark.process
def test_ui_outside_a_project_only_reads(home: Path, folder: Path) -> None:
    before = _tree(folder)
    with subprocess.Popen(
        [sys.executable, "-m", "personae", "ui", "--port", "0"], cwd=folder,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "HOME": str(home)},
    ) as viewer:  # fmt: skip
        try:
            assert viewer.stdout is not None
            line = viewer.stdout.readline()
        finally:
            viewer.terminate()
            viewer.wait(30)
    assert line.startswith("personae ui: http://127.0.0.1:"), line
    assert f"(project {folder.resolve()};" in line
    assert _tree(folder) == before
