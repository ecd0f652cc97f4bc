"""The one atomic-write helper: content, permission rules, no leftovers on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from personae.fsutil import write_atomic


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_new_file_gets_the_umask_mode_and_exact_bytes(tmp_path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    target = tmp_path / "a.txt"
    write_atomic(target, b"one\r\ntwo\n")
    assert target.read_bytes() == b"one\r\ntwo\n"
    assert mode_of(target) == 0o666 & ~umask


def test_existing_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")
    target.chmod(0o640)
    write_atomic(target, b"new", new_mode=0o644)
    assert (target.read_text(), mode_of(target)) == ("new", 0o640)


def test_new_mode_applies_only_to_new_files(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    write_atomic(target, b"x", new_mode=0o604)
    assert mode_of(target) == 0o604


def test_forced_mode_wins_over_existing(tmp_path: Path) -> None:
    target = tmp_path / "secret.json"
    target.write_text("{}")
    target.chmod(0o644)
    write_atomic(target, b"{}", mode=0o600)
    assert mode_of(target) == 0o600


def test_failure_leaves_old_content_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")

    with pytest.raises(TypeError):
        write_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_does_not_follow_a_planted_temp_symlink(tmp_path: Path) -> None:
    # Temp names are random and opened O_EXCL|O_NOFOLLOW: a planted link is never written through.
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    folder = tmp_path / "d"
    folder.mkdir()
    for i in range(5):
        (folder / f".a.txt.planted{i}.tmp").symlink_to(outside)
    write_atomic(folder / "a.txt", b"new")
    assert outside.read_text() == "keep"
    assert (folder / "a.txt").read_text() == "new"


def test_read_regular_refuses_special_files_without_blocking(tmp_path: Path) -> None:
    from personae.fsutil import NotRegularFileError, read_regular

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)  # nobody writes: a plain open() would wait forever
    with pytest.raises(NotRegularFileError, match=r"not a regular file \(a FIFO\)"):
        read_regular(fifo)
    link = tmp_path / "zero"
    link.symlink_to("/dev/zero")
    with pytest.raises(NotRegularFileError, match="character device"):
        read_regular(link)
    with pytest.raises(IsADirectoryError):
        read_regular(tmp_path)
    with pytest.raises(FileNotFoundError):
        read_regular(tmp_path / "missing")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 11)
    with pytest.raises(NotRegularFileError, match="larger than 10 bytes"):
        read_regular(big, max_bytes=10)
    assert read_regular(big, max_bytes=11) == b"x" * 11


def test_private_dir_is_0700_whatever_the_umask(tmp_path: Path) -> None:
    from personae.fsutil import private_dir

    old = os.umask(0)
    try:
        made = private_dir(tmp_path / "a" / "memory")
    finally:
        os.umask(old)
    assert mode_of(made) == 0o700
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    assert mode_of(private_dir(shared)) == 0o700
