"""Every python block of docs/api.md runs, in order, in one namespace, in a temp folder.

The blocks use the scripted replay server (``scripted:`` specs) only; the
conftest makes any other model request fail. Each block's own asserts are
the checks; this test also checks that every public name of ``personae`` is
documented there and has a docstring.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.models import override_allow_model_requests

import personae

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", DOC.read_text(encoding="utf-8"), re.M | re.S)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 8


@pytest.mark.process
def test_every_python_block_runs(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    namespace: dict[str, Any] = {"__name__": "__api_docs__"}
    with override_allow_model_requests(True):
        for number, block in enumerate(BLOCKS, start=1):
            code = compile(block, f"docs/api.md block {number}", "exec")
            exec(code, namespace)


def test_every_public_name_is_documented_with_a_docstring() -> None:
    text = DOC.read_text(encoding="utf-8")
    names = [n for n in personae.__all__ if not n.startswith("_")]
    missing = [n for n in names if f"`{n}" not in text]
    assert missing == []
    undocumented = [n for n in names if not inspect.getdoc(getattr(personae, n))]
    assert undocumented == []


def test_the_readme_python_example_runs(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    readme = DOC.parents[1] / "README.md"
    [block] = re.findall(r"^```python\n(.*?)^```", readme.read_text(encoding="utf-8"), re.M | re.S)
    assert len(block.strip().splitlines()) <= 12
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    with override_allow_model_requests(True):
        exec(compile(block, "README.md", "exec"), namespace)
    result = namespace["result"]
    assert result.status == "done" and "8081" in result.answer
