"""A folder never becomes a project by accident: the data folder is no project marker,
commands that store outside a project refuse, and doctor says what it found."""

from __future__ import annotations

from pathlib import Path

import pytest

from _helpers import personae_cli
from personae.layout import find_root, user_data_dir


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home folder holding the default data folder ``~/.personae`` (no PERSONAE_HOME)."""
    folder = tmp_path / "home"
    (folder / ".personae" / "memory").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(folder))
    monkeypatch.delenv("PERSONAE_HOME", raising=False)
    return folder


def test_the_data_folder_marks_no_project(home: Path) -> None:
    deep = home / "code" / "thing"
    deep.mkdir(parents=True)
    assert user_data_dir() == home / ".personae"
    assert find_root(deep) is None and find_root(home) is None
    (home / "code" / ".personae").mkdir()  # a real project below home is still found
    assert find_root(deep) == (home / "code").resolve()


def test_commands_in_home_write_nothing_and_say_why(home: Path) -> None:
    folder = home / "notes"
    folder.mkdir()
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    run = personae_cli("run", "hi", "--model", "openai:gpt-4o", cwd=folder, drop=["PERSONAE_HOME"])
    assert run.returncode == 1 and run.stdout == ""
    assert run.stderr.startswith(f"personae: error: no personae project in {folder.resolve()}")
    assert "personae init" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    init = personae_cli("init", str(home), cwd=home, drop=["PERSONAE_HOME"])
    assert init.returncode == 1 and "data folder" in init.stderr
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before
    doctor = personae_cli("doctor", "--no-probe", cwd=folder, drop=["PERSONAE_HOME"])
    line = next(x for x in doctor.stdout.splitlines() if "project:" in x)
    assert line.startswith("WARN project: no project") and "data folder" in line
