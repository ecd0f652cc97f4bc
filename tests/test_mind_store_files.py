"""The mind store's files: reserved names, no temp or lock file left behind.

Through a real MCP client session, and with real processes killed by SIGKILL
in the middle of a write. (Size limits as tool errors over real HTTP:
``tests/test_mind_server.py``.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from personae.mind.server import MindPaths, create_server

MEMO = "---\nname: Tea\ndescription: likes tea\ntype: user\n---\nGreen tea.\n"


def _paths(tmp_path: Path) -> MindPaths:
    (tmp_path / "memory").mkdir()
    (tmp_path / "mind.md").write_text("You are the mind.\n")
    return MindPaths(
        memory_dir=tmp_path / "memory", prompt=tmp_path / "mind.md", store=tmp_path / "state.db"
    )


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((".tmp", ".lock")))


def test_reserved_files_are_not_writable_through_the_tools(tmp_path: Path) -> None:
    paths = _paths(tmp_path)
    server, _ = create_server(paths)
    got: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server) as client:
            got["ok"] = await client.call_tool(
                "write_memory_file", {"name": "tea.md", "content": MEMO}
            )
            for name in ("MEMORY.md", "memory.md", "CLAUDE.md", "AGENTS.md"):
                got[name] = await client.call_tool(
                    "write_memory_file", {"name": name, "content": "# pwned\n"}
                )

    anyio.run(main)
    assert got["ok"].is_error is False
    index = (paths.memory_dir / "MEMORY.md").read_text()
    assert "[Tea](tea.md)" in index and "pwned" not in index
    for name in ("MEMORY.md", "memory.md", "CLAUDE.md", "AGENTS.md"):
        assert got[name].is_error, name
        assert f"{name} is reserved" in got[name].content[0].text
    assert sorted(p.name for p in paths.memory_dir.iterdir()) == ["MEMORY.md", "tea.md"]


# --- temp and lock files ------------------------------------------------------------------

_STUCK_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    def stuck(fd):  # the write is in progress: temp file open, lock held
        Path(sys.argv[2]).touch()
        time.sleep(600)

    os.fsync = stuck
    if sys.argv[1] == "memory":
        from personae.mind.memory import MemoryDir
        MemoryDir(Path(sys.argv[3])).write("tea.md", sys.argv[4])
    else:
        from personae.handover.files import read_handover, save_handover
        save_handover(read_handover(sys.argv[3]).handover, sys.argv[3])
    """
)


def _kill_mid_write(kind: str, target: Path, tmp_path: Path, content: str = "") -> None:
    marker = tmp_path / f"{kind}.writing"
    proc = subprocess.Popen(
        [sys.executable, "-c", _STUCK_WRITER, kind, str(marker), str(target), content]
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "writer never started"
            time.sleep(0.02)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.process
def test_memory_writes_leave_no_temp_or_lock_file_on_any_path(tmp_path: Path) -> None:
    from personae.errors import UsageError
    from personae.mind.memory import MemoryDir

    folder = tmp_path / "memory"
    memory = MemoryDir(folder)
    memory.write("tea.md", MEMO)  # success
    assert _leftovers(folder) == []
    with pytest.raises(UsageError, match="frontmatter"):
        memory.write("bad.md", "no frontmatter")  # refused
    assert _leftovers(folder) == []
    _kill_mid_write("memory", folder, tmp_path, MEMO.replace("Green", "Black"))
    left = _leftovers(folder)
    assert ".memory.lock" in left and any(n.endswith(".tmp") for n in left)  # what a kill leaves
    memory.write("coffee.md", MEMO.replace("Tea", "Coffee"))  # the next write cleans up
    assert _leftovers(folder) == []
    assert "Green tea." in (folder / "tea.md").read_text()  # the killed write changed nothing


@pytest.mark.process
def test_handover_writes_leave_no_lock_or_temp_file(tmp_path: Path) -> None:
    (tmp_path / ".personae").mkdir()  # handovers are written only in a project
    env = {**os.environ, "COLUMNS": "120"}
    created = subprocess.run(
        [sys.executable, "-m", "personae", "handover", "create",
         "--to", "researcher", "--task", "t"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    path = Path(created.stdout.strip())
    folder = path.parent
    assert _leftovers(folder) == []
    assert (folder.stat().st_mode & 0o777) == 0o700
    _kill_mid_write("handover", path, tmp_path)
    assert sorted(n.split(".")[-1] for n in _leftovers(folder)) == ["lock", "tmp"]
    from personae.handover.files import read_handover, save_handover

    before = json.loads(path.read_text())
    save_handover(read_handover(path).handover, path)
    assert _leftovers(folder) == []
    assert json.loads(path.read_text()) == before


def test_the_memory_folder_is_private_only_where_it_is_personae_s_own(tmp_path: Path) -> None:
    from personae.mind.memory import MemoryDir

    own = tmp_path / "proj" / ".personae" / "memory"
    own.mkdir(parents=True, mode=0o755)
    MemoryDir(own).write("tea.md", MEMO)
    assert own.stat().st_mode & 0o777 == 0o700
    new = tmp_path / "fresh"  # created by the write: 0700 too
    MemoryDir(new).write("tea.md", MEMO)
    assert new.stat().st_mode & 0o777 == 0o700
    elsewhere = tmp_path / "shared-notes"  # a folder the user pointed the mind at
    elsewhere.mkdir(mode=0o755)
    MemoryDir(elsewhere).write("tea.md", MEMO)
    assert elsewhere.stat().st_mode & 0o777 == 0o755
    assert (elsewhere / "tea.md").stat().st_mode & 0o777 == 0o600
