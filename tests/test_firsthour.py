"""A newcomer's first hour: clean output on a terminal, no third-party noise."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from personae.tools._walk import glob_regex


def run_on_terminal(args: list[str], cwd: Path, *, columns: int = 80, timeout: float = 120) -> str:
    """Run ``python -m personae ARGS`` with stdin, stdout and stderr on a pseudo-terminal.

    CI and PYTEST_VERSION are removed from the child's environment: third-party
    libraries hide their banners under them, so the check could not fail otherwise.
    """
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "PYTEST_VERSION"}}
    env.update(COLUMNS=str(columns), TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    env.pop("_TYPER_FORCE_DISABLE_TERMINAL", None)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "personae", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=timeout) == 0, b"".join(chunks).decode(errors="replace")[-2000:]
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))


def test_demo_on_a_terminal_shows_no_third_party_banner(tmp_path: Path) -> None:
    out = run_on_terminal(["demo"], tmp_path)
    assert "Stored as run run-" in out  # the demo ran to its end on the terminal
    for noise in ("Logfire", "pydantic-ai v", "PYDANTIC_AI_NO_BANNER", "observability"):
        assert noise not in out, out


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("[--0]", ".", True),
        ("[a&&b]", "&", True),
        ("[a~~b]", "c", False),
        ("[a||b]", "|", True),
        ("[a-c]", "b", True),
        ("[!a-c]", "b", False),
        ("[]]", "]", True),
        ("[^]", "^", True),
    ],
)
def test_glob_classes_compile_without_future_warnings(
    pattern: str, name: str, matches: bool
) -> None:
    glob_regex.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Python's "possible set difference" is a FutureWarning
        assert bool(glob_regex(pattern).match(name)) is matches


def test_reversed_glob_range_is_an_error_not_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(re.error):
            glob_regex("[a--b]")  # the range a..'-' is reversed
