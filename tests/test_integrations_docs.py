"""Every Python example in docs/integrations.md runs as written (offline)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_doc_has_examples_for_each_framework() -> None:
    joined = "\n".join(BLOCKS)
    for module in ("langchain", "pydantic_ai", "openai_agents"):
        assert f"personae.integrations.{module}" in joined


@pytest.mark.parametrize("index", range(len(BLOCKS)))
@pytest.mark.process
def test_doc_example_runs(index: int, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", BLOCKS[index]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip(), "each example prints what it shows"
