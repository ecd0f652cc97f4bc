"""Mind contract assembly: @include, confinement, cycles, failures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from personae.mind.contract import ERROR_PREFIX, load_contract


def _w(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_nested_includes_assemble(tmp_path: Path) -> None:
    top = _w(tmp_path / "p" / "mind.md", "A\n@include parts/b.md\nC\n")
    _w(tmp_path / "p" / "parts" / "b.md", "B1\n  @include ../d.md\n")
    _w(tmp_path / "p" / "d.md", "D")
    contract = load_contract(top)
    assert contract.available and contract.reason is None
    assert contract.text == "A\nB1\nD\nC\n"
    assert contract.sources == ("mind.md", "parts/b.md", "d.md")
    assert len(contract.hash) == 64


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("@include missing.md\n", "not found"),
        ("@include ../outside.md\n", "escapes the prompt directory"),
        ("@include /etc/hostname\n", "must be a relative path"),
        ("@include self.md\n", "cycle"),
    ],
)
def test_failures_are_degraded(tmp_path: Path, body: str, reason: str) -> None:
    _w(tmp_path / "outside.md", "secret")
    top = _w(tmp_path / "p" / "self.md", body)
    contract = load_contract(top)
    assert not contract.available
    assert contract.reason is not None and reason in contract.reason
    assert contract.text.startswith(ERROR_PREFIX)
    assert "secret" not in contract.text


def test_indirect_cycle(tmp_path: Path) -> None:
    top = _w(tmp_path / "a.md", "@include b.md\n")
    _w(tmp_path / "b.md", "@include a.md\n")
    contract = load_contract(top)
    assert not contract.available and "a.md -> b.md -> a.md" in str(contract.reason)


def test_symlink_escape_is_refused(tmp_path: Path) -> None:
    _w(tmp_path / "secret.md", "secret")
    top = _w(tmp_path / "p" / "mind.md", "@include link.md\n")
    os.symlink(tmp_path / "secret.md", tmp_path / "p" / "link.md")
    contract = load_contract(top)
    assert not contract.available and "escapes" in str(contract.reason)


def test_missing_empty_and_unset_prompt(tmp_path: Path) -> None:
    assert "not found" in str(load_contract(tmp_path / "nope.md").reason)
    assert "empty" in str(load_contract(_w(tmp_path / "e.md", " \n")).reason)
    assert "no prompt file" in str(load_contract(None).reason)
    bad = tmp_path / "bin.md"
    bad.write_bytes(b"\xff\xfe\x00")
    assert "UTF-8" in str(load_contract(bad).reason)
