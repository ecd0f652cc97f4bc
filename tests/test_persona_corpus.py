"""116 real, published Claude Code agent files load with zero errors.

See tests/data/claude_agents/SOURCE.md for where they come from.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from personae.persona import Cast

CORPUS = Path(__file__).parent / "data" / "claude_agents"
DIRS = [CORPUS / "claude-flow", CORPUS / "oh-my-claude-sisyphus"]


def test_corpus_is_big_enough_and_licensed() -> None:
    files = [p for d in DIRS for p in d.rglob("*.md")]
    assert len(files) >= 100
    assert (CORPUS / "SOURCE.md").is_file()
    assert all((CORPUS / f"{d.name}.LICENSE").read_text().startswith("MIT License") for d in DIRS)


def test_corpus_loads_with_zero_errors(tmp_path: Path) -> None:
    cast = Cast.load(tmp_path, DIRS)
    assert [str(e) for e in cast.errors] == []
    assert len(cast.personas) >= 100
    # Tools personae does not provide are left out and listed, never silently kept.
    with_unavailable = [p for p in cast.personas.values() if p.unavailable_tools]
    assert with_unavailable
    for persona in with_unavailable:
        assert not set(persona.unavailable_tools) & set(persona.tools or [])
    # Every persona renders.
    assert cast.available_agents_xml().count("<agent>") == len(cast.personas)


@pytest.mark.process
def test_corpus_check_cli_exit_0(tmp_path: Path) -> None:
    args = [arg for d in DIRS for arg in ("--dir", str(d))]
    result = subprocess.run(
        [sys.executable, "-m", "personae", "personas", "check", "--json", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-2000:]
    data = json.loads(result.stdout)
    assert data["errors"] == 0
    assert data["personas"] >= 100
