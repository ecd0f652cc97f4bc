"""Workspace confinement: `..`, absolute paths, symlink escapes, odd strings."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from personae.errors import ToolError, UsageError
from personae.tools.workspace import Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace root with a sibling 'outside' directory and a few symlinks."""
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (root / "sub" / "a.txt").write_text("a")
    (root / "link_out").symlink_to(outside)  # directory link leaving the root
    (root / "file_out").symlink_to(outside / "secret.txt")  # file link leaving the root
    (root / "dangling_out").symlink_to(outside / "nope.txt")  # dangling, points outside
    (root / "link_in").symlink_to(root / "sub")  # stays inside
    return root, outside


def test_relative_and_inside_paths_resolve(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    ws = Workspace(root)
    assert ws.resolve("sub/a.txt") == root.resolve() / "sub" / "a.txt"
    assert ws.resolve(".") == root.resolve()
    assert ws.resolve("sub/../sub/a.txt") == root.resolve() / "sub" / "a.txt"
    assert ws.resolve("link_in/a.txt") == root.resolve() / "sub" / "a.txt"
    assert ws.resolve(str(root / "sub")) == root.resolve() / "sub"
    assert ws.resolve("new/dir/file.txt") == root.resolve() / "new" / "dir" / "file.txt"


@pytest.mark.parametrize(
    "path",
    [
        "..",
        "../outside/secret.txt",
        "sub/../../outside",
        "/etc/passwd",
        "link_out",
        "link_out/secret.txt",
        "file_out",
        "dangling_out",
        "link_in/../../outside",
    ],
)
def test_escapes_are_refused_naming_the_path(layout: tuple[Path, Path], path: str) -> None:
    root, _ = layout
    with pytest.raises(ToolError) as info:
        Workspace(root).resolve(path, tool="read_file")
    assert repr(path) in str(info.value)
    assert "outside the workspace" in str(info.value)
    assert info.value.tool == "read_file"


@pytest.mark.parametrize(
    ("path", "needle"),
    [
        ("a\x00b", "NUL"),
        ("a\nb", "control"),
        ("bad\udcffname", "Unicode"),
        ("", "empty"),
        ("   ", "empty"),
        (42, "must be a string"),
        (None, "must be a string"),
    ],
)
def test_odd_values_are_refused(tmp_path: Path, path: object, needle: str) -> None:
    with pytest.raises(ToolError, match=needle):
        Workspace(tmp_path).resolve(path)


def test_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        Workspace(tmp_path / "missing")
    (tmp_path / "f").write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        Workspace(tmp_path / "f")


def test_symlinked_root_and_with_root(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "alias").symlink_to(real)
    ws = Workspace(tmp_path / "alias")
    assert ws.root == real.resolve()
    other = tmp_path / "other"
    other.mkdir()
    moved = ws.with_root(other)
    assert moved.root == other.resolve()
    assert ws.root == real.resolve()  # the original is unchanged
    with pytest.raises(ToolError):
        moved.resolve(str(real))
    assert moved.relative(other.resolve() / "x" / "y") == "x/y"
    assert moved.relative(other.resolve()) == "."


def _walk(root: Path, segments: list[str]) -> Path:
    """Independent oracle: follow segments one by one like the kernel (links are absolute)."""
    cur = root
    for seg in segments:
        if seg == ".":
            continue
        if seg == "..":
            cur = cur.parent
            continue
        cur = cur / seg
        while cur.is_symlink():
            cur = Path(os.readlink(cur))
    return cur


_SEGMENTS = st.sampled_from(["..", ".", "sub", "a.txt", "link_out", "link_in", "file_out", "zz"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_SEGMENTS, min_size=1, max_size=6))
def test_property_resolved_paths_never_leave_the_root(
    tmp_path_factory: pytest.TempPathFactory, segments: list[str]
) -> None:
    base = tmp_path_factory.getbasetemp() / "prop"
    root = base / "ws"
    if not root.exists():
        (root / "sub").mkdir(parents=True)
        (base / "outside").mkdir()
        (root / "sub" / "a.txt").write_text("a")
        (root / "link_out").symlink_to(base / "outside")
        (root / "link_in").symlink_to(root / "sub")
        (root / "file_out").symlink_to(base / "outside" / "f")
    ws = Workspace(root)
    rel = "/".join(segments)
    real = _walk(ws.root, segments)
    inside = real == ws.root or real.is_relative_to(ws.root)
    if inside:
        assert ws.resolve(rel) == real
    else:
        with pytest.raises(ToolError):
            ws.resolve(rel)
