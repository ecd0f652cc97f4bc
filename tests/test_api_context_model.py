"""``personae.api.context.assemble`` sizes the budget by the model a run would use."""

from __future__ import annotations

from pathlib import Path

import pytest

from personae.api.context import assemble
from personae.tokens.registry import model_info

WRITER = """---
name: writer
description: Writes the report.
tools: [read_file]
model: sonnet
---
You write reports.
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("PERSONAE_MODEL", raising=False)
    (tmp_path / ".personae" / "personas").mkdir(parents=True)
    (tmp_path / ".personae" / "personas" / "writer.md").write_text(WRITER, encoding="utf-8")
    return tmp_path


def _window(project: Path, **options: str) -> int | None:
    return assemble(project, "worker", task="Write it.", **options).report().window


@pytest.mark.process
def test_a_claude_alias_is_sized_as_the_model_it_names(project: Path) -> None:
    claude = model_info("anthropic:claude-sonnet-4-5").context_window
    assert claude != model_info("openai:gpt-4o").context_window
    assert _window(project, model="sonnet") == claude
    assert _window(project, model="openai:gpt-4o") == model_info("openai:gpt-4o").context_window


def test_a_persona_with_its_own_model_is_sized_by_it_as_in_a_run(project: Path) -> None:
    claude = model_info("anthropic:claude-sonnet-4-5").context_window
    assert _window(project, persona="writer", model="openai:gpt-4o") == claude
    assert _window(project, persona="writer") == claude


def test_no_model_anywhere_uses_the_default_window(project: Path) -> None:
    assert _window(project) == model_info(None).context_window
