"""Race-free confinement: file tools open paths from a root descriptor without following links.

The race test runs a real flipper process (a folder swapped with a symlink to
outside the workspace, ``renameat2(RENAME_EXCHANGE)`` in a tight loop) against
the real tool functions. Before the fix this let 5 reads, 4 writes, 6 listings
and 7 greps out of 3,000 each escape; ``bench/bench_confinement.py`` runs
30,000 of each.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _confine_race import race
from personae.fsutil import write_atomic
from personae.tools.workspace import PathChangedError, Workspace


@pytest.mark.parametrize(("kind", "attempts"), [("read", 5000), ("write", 5000),
                                                ("list", 2000), ("grep", 2000)])  # fmt: skip
@pytest.mark.process
def test_no_escape_while_a_folder_flips_to_an_outside_link(
    tmp_path: Path, kind: str, attempts: int
) -> None:
    result = race(tmp_path, kind, attempts)
    assert result.escapes == 0, result
    # The race really ran: some calls saw the folder, some were refused mid-flip.
    assert result.inside > 0 and result.refused > 0, result
    assert sorted(os.listdir(tmp_path / "outside")) == ["outside-only.txt", "secret.txt"]


def _swapped(tmp_path: Path) -> tuple[Workspace, Path]:
    """A path checked while ``d`` was a folder, then ``d`` replaced by a link to outside."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "d").mkdir(parents=True)
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE")
    ws = Workspace(root)
    checked = ws.resolve("d/f.txt")
    (root / "d").rmdir()
    (root / "d").symlink_to(outside)
    return ws, checked


def test_open_refuses_a_component_that_became_a_link(tmp_path: Path) -> None:
    ws, checked = _swapped(tmp_path)
    with pytest.raises(PathChangedError), ws.parent_fd(checked):
        pass
    with pytest.raises(PathChangedError):
        ws.open_dir(checked.parent)
    with pytest.raises(PathChangedError), ws.parent_fd(checked / "deeper", create=True):
        pass
    assert sorted(os.listdir(tmp_path / "outside")) == ["f.txt"]


def test_parent_fd_creates_missing_folders_and_renames_inside(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    target = ws.resolve("a/b/c.txt")
    with ws.parent_fd(target, create=True) as (parent, name):
        assert name == "c.txt"
        write_atomic(Path(name), b"hello", dir_fd=parent)
    assert (tmp_path / "a" / "b" / "c.txt").read_bytes() == b"hello"
    assert [p.name for p in (tmp_path / "a" / "b").iterdir()] == ["c.txt"]  # no temp left
    with pytest.raises(ValueError, match="no parent"), ws.parent_fd(ws.root):
        pass


def test_write_atomic_with_dir_fd_replaces_a_link_instead_of_following_it(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "x.txt").symlink_to(outside)
    fd = os.open(tmp_path / "ws", os.O_RDONLY | os.O_DIRECTORY)
    try:
        write_atomic(Path("x.txt"), b"new", dir_fd=fd)
    finally:
        os.close(fd)
    assert outside.read_text() == "keep"
    assert not (tmp_path / "ws" / "x.txt").is_symlink()
    assert (tmp_path / "ws" / "x.txt").read_bytes() == b"new"
