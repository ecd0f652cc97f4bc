"""Symlink checks stay exact when many artifact paths share a folder (listed once)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from personae.security.policy import HandoverSecurityError, PathPolicy


def _folder(tmp_path: Path, count: int) -> tuple[Path, list[str]]:
    root = tmp_path / "project"
    (root / "data").mkdir(parents=True)
    names = [f"data/part-{i:04d}.h5" for i in range(count)]
    for name in names[: count // 2]:  # half exist, half are only named
        (root / name).write_text("x")
    return root, names


@pytest.mark.parametrize("count", [5, 40, 400])
def test_symlink_out_of_roots_refused_in_a_busy_folder(tmp_path: Path, count: int) -> None:
    root, names = _folder(tmp_path, count)
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    os.symlink(outside, root / "data" / "part-0003.h5.link")
    names[3] = "data/part-0003.h5.link"
    policy = PathPolicy(roots=[root])
    with pytest.raises(HandoverSecurityError) as caught:
        policy.resolve_strings(names, root, what="artifact path")
    assert caught.value.index == 3
    assert "outside the allowed roots" in caught.value.message


@pytest.mark.parametrize("count", [5, 40, 400])
def test_symlink_inside_roots_resolved_in_a_busy_folder(tmp_path: Path, count: int) -> None:
    root, names = _folder(tmp_path, count)
    os.symlink(root / "data" / "part-0000.h5", root / "data" / "alias.h5")
    names[-1] = "data/alias.h5"
    resolved = PathPolicy(roots=[root]).resolve_strings(names, root)
    assert resolved[-1] == os.path.realpath(root / "data" / "part-0000.h5")
    assert resolved[0] == os.path.realpath(root / "data" / "part-0000.h5")
    assert resolved[1] == os.path.join(os.path.realpath(root), "data", "part-0001.h5")


def test_link_free_busy_folder_resolves_every_name(tmp_path: Path) -> None:
    root, names = _folder(tmp_path, 300)
    real_root = os.path.realpath(root)
    resolved = PathPolicy(roots=[root]).resolve_strings(names, root)
    assert resolved == [os.path.join(real_root, n) for n in names]


def test_huge_folder_falls_back_to_per_name_checks(tmp_path: Path) -> None:
    root, names = _folder(tmp_path, 40)
    for i in range(40 * 8 + 10):  # more entries than the listing budget
        (root / "data" / f"other-{i}").write_text("")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    os.symlink(outside, root / "data" / "zz-link")
    names[7] = "data/zz-link"
    with pytest.raises(HandoverSecurityError) as caught:
        PathPolicy(roots=[root]).resolve_strings(names, root)
    assert caught.value.index == 7
