"""The error tree and the CLI's error mapping (real subprocesses)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from _helpers import personae_cli
from personae.errors import BudgetExceededError, UnknownNameError, UsageError
from personae.project import Project


def personae(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd)


def test_usage_error_renders_file_line_field() -> None:
    err = UsageError("must be a string", file="a/b.md", line=3, field="name")
    assert str(err) == "a/b.md:3: name: must be a string"


def test_unknown_name_lists_choices_and_closest() -> None:
    err = UnknownNameError("tool", "reed_file", ["read_file", "write_file"])
    assert err.closest == "read_file"
    assert "did you mean 'read_file'" in str(err)
    assert "valid: read_file, write_file" in str(err)


def test_budget_error_says_by_how_much() -> None:
    err = BudgetExceededError(1200, 1000)
    assert err.over == 200
    assert "200 over" in str(err)


def config_error(root: Path, text: str) -> str:
    """The message of the :class:`UsageError` that opening ``root`` with ``text`` as its
    ``.personae/config.yaml`` raises (the test fails if it is accepted)."""
    (root / ".personae").mkdir()
    (root / ".personae" / "config.yaml").write_text(text)
    with pytest.raises(UsageError) as raised:
        Project.open(root)
    return str(raised.value)


def test_bad_config_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    message = config_error(tmp_path, "commands:\n  enabled: [\n")
    assert message.startswith(str(tmp_path / ".personae" / "config.yaml") + ":")
    assert "malformed YAML" in message


def test_unknown_config_field_names_the_field(tmp_path: Path) -> None:
    assert "commands.enabeld" in config_error(tmp_path, "commands:\n  enabeld: true\n")


def test_cli_bad_usage_exits_2_without_traceback() -> None:
    result = personae("no-such-command")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_cli_help_exits_0() -> None:
    result = personae("--help")
    assert result.returncode == 0
    assert "personae" in result.stdout
