"""Built-in file tools through the registry: read_file, write_file, edit_file."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from _helpers import builtin_subset as _subset
from _helpers import call_tool as call
from _helpers import run_async
from personae.errors import ToolError


def test_read_file_whole_and_by_lines(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    tools = _subset(tmp_path)
    assert call(tools, "read_file", path="f.txt").startswith("line 1\nline 2\n")
    part = call(tools, "read_file", path="f.txt", offset=3, limit=2)
    assert part.splitlines() == [
        "line 3",
        "line 4",
        "[more lines after line 4; use offset=5 to continue]",
    ]
    assert call(tools, "read_file", path="f.txt", offset=10) == "line 10\n"
    assert "past the end" in call(tools, "read_file", path="f.txt", offset=50)


def test_read_file_size_cap_and_refusals(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("x" * 50 + "\n" + "y" * 50 + "\n")
    (tmp_path / "bin.dat").write_bytes(b"abc\x00def")
    (tmp_path / "d").mkdir()
    tools = _subset(tmp_path, read_max_bytes=60)
    out = call(tools, "read_file", path="big.txt")
    assert out.startswith("x" * 50 + "\n")
    assert "yy" not in out
    assert "[truncated at 60 bytes" in out
    with pytest.raises(ToolError, match="binary"):
        call(tools, "read_file", path="bin.dat")
    with pytest.raises(ToolError, match="no such file"):
        call(tools, "read_file", path="missing.txt")
    with pytest.raises(ToolError, match="directory"):
        call(tools, "read_file", path="d")
    with pytest.raises(ToolError, match="invalid arguments: offset"):
        call(tools, "read_file", path="big.txt", offset=0)
    with pytest.raises(ToolError, match="invalid arguments: bogus"):
        call(tools, "read_file", path="big.txt", bogus=1)


def test_read_file_refuses_symlink_escape(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "secret").write_text("top secret")
    (root / "peek").symlink_to(tmp_path / "secret")
    tools = _subset(root)
    with pytest.raises(ToolError, match="outside the workspace"):
        call(tools, "read_file", path="peek")
    assert tools.calls[-1].ok is False
    assert "top secret" not in tools.calls[-1].result_preview


def test_write_file_creates_replaces_atomically(tmp_path: Path) -> None:
    tools = _subset(tmp_path)
    assert (
        call(tools, "write_file", path="a/b/c.txt", content="one") == "created a/b/c.txt (3 bytes)"
    )
    target = tmp_path / "a" / "b" / "c.txt"
    assert target.read_text() == "one"
    target.chmod(0o600)
    assert call(tools, "write_file", path="a/b/c.txt", content="two!").startswith("replaced")
    assert target.read_text() == "two!"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600  # mode kept across the replace
    assert sorted(os.listdir(target.parent)) == ["c.txt"]  # no temp files left behind


def test_write_file_refusals_leave_nothing(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "out"
    outside.mkdir()
    (root / "escape").symlink_to(outside)
    tools = _subset(root, write_max_bytes=10)
    with pytest.raises(ToolError, match="outside the workspace"):
        call(tools, "write_file", path="escape/pwned.txt", content="x")
    with pytest.raises(ToolError, match="outside the workspace"):
        call(tools, "write_file", path="../out/pwned.txt", content="x")
    with pytest.raises(ToolError, match="cap is 10"):
        call(tools, "write_file", path="big.txt", content="x" * 11)
    with pytest.raises(ToolError, match="is a directory"):
        call(tools, "write_file", path=".", content="x")
    assert list(outside.iterdir()) == []
    assert sorted(p.name for p in root.iterdir()) == ["escape"]


def test_edit_file_single_edit_rules(tmp_path: Path) -> None:
    f = tmp_path / "code.py"
    f.write_text("a = 1\nb = 1\nc = 2\n")
    tools = _subset(tmp_path)
    assert call(tools, "edit_file", path="code.py", old_string="c = 2", new_string="c = 3") == (
        "edited code.py: 1 replacement"
    )
    assert f.read_text() == "a = 1\nb = 1\nc = 3\n"
    with pytest.raises(ToolError, match="occurs 2 times"):
        call(tools, "edit_file", path="code.py", old_string=" = 1", new_string=" = 9")
    with pytest.raises(ToolError, match="not found"):
        call(tools, "edit_file", path="code.py", old_string="zzz", new_string="y")
    with pytest.raises(ToolError, match="identical"):
        call(tools, "edit_file", path="code.py", old_string="a", new_string="a")
    assert f.read_text() == "a = 1\nb = 1\nc = 3\n"
    out = call(
        tools, "edit_file", path="code.py", old_string=" = 1", new_string=" = 9", replace_all=True
    )
    assert out == "edited code.py: 2 replacements"
    assert f.read_text() == "a = 9\nb = 9\nc = 3\n"


def test_edit_file_multi_edit_all_or_nothing(tmp_path: Path) -> None:
    f = tmp_path / "t.md"
    f.write_text("alpha beta gamma\n")
    tools = _subset(tmp_path)
    edits = [
        {"old_string": "alpha", "new_string": "ALPHA"},
        {"old_string": "ALPHA beta", "new_string": "AB"},  # sees the first edit's result
    ]
    assert call(tools, "edit_file", path="t.md", edits=edits) == "edited t.md: 2 replacements"
    assert f.read_text() == "AB gamma\n"
    bad = [{"old_string": "gamma", "new_string": "G"}, {"old_string": "nope", "new_string": "x"}]
    with pytest.raises(ToolError, match="edit 2: old_string not found"):
        call(tools, "edit_file", path="t.md", edits=bad)
    assert f.read_text() == "AB gamma\n"  # the first edit was not written either
    with pytest.raises(ToolError, match="not both"):
        call(tools, "edit_file", path="t.md", old_string="a", new_string="b", edits=edits)
    with pytest.raises(ToolError, match="old_string and new_string"):
        call(tools, "edit_file", path="t.md")


def test_read_file_edges(tmp_path: Path) -> None:
    (tmp_path / "nonl.txt").write_text("a\nb")  # no trailing newline
    (tmp_path / "one_line.txt").write_text("q" * 5000)
    (tmp_path / "empty.txt").write_text("")
    tools = _subset(tmp_path, read_max_bytes=100)
    assert call(tools, "read_file", path="nonl.txt") == "a\nb"
    assert call(tools, "read_file", path="nonl.txt", offset=2) == "b"
    assert call(tools, "read_file", path="nonl.txt", offset=1, limit=1) == (
        "a\n[more lines after line 1; use offset=2 to continue]"
    )
    assert "past the end" in call(tools, "read_file", path="nonl.txt", offset=3)
    assert call(tools, "read_file", path="empty.txt") == ""
    long = call(tools, "read_file", path="one_line.txt")
    assert long.startswith("q" * 100 + "\n[truncated at 100 bytes, stopped in line 1")
    assert "q" * 101 not in long


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_write_file_new_files_get_the_umask_mode(tmp_path: Path, umask: int) -> None:
    tools = _subset(tmp_path)
    old = os.umask(umask)
    try:
        call(tools, "write_file", path="new.txt", content="x")
        (tmp_path / "kept.txt").write_text("a")
        (tmp_path / "kept.txt").chmod(0o754)
        call(tools, "edit_file", path="kept.txt", old_string="a", new_string="b")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE((tmp_path / "kept.txt").stat().st_mode) == 0o754
    assert (tmp_path / "kept.txt").read_text() == "b"
    assert sorted(os.listdir(tmp_path)) == ["kept.txt", "new.txt"]


@pytest.mark.parametrize("tool", ["read_file", "edit_file"])
def test_fifo_is_refused_without_hanging(tmp_path: Path, tool: str) -> None:
    os.mkfifo(tmp_path / "pipe")
    tools = _subset(tmp_path)
    args: dict[str, Any] = {"path": "pipe"}
    if tool == "edit_file":
        args |= {"old_string": "a", "new_string": "b"}

    async def run() -> str:
        return await asyncio.wait_for(tools.dispatch(tool, args), 5)

    with pytest.raises(ToolError, match="pipe is not a regular file"):
        run_async(run())
