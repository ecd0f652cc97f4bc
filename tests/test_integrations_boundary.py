"""The integrations stay at the edge: nothing in personae imports them or their frameworks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "personae"
FRAMEWORKS = ("langchain", "langchain_core", "agents", "langgraph")


def test_nothing_outside_integrations_imports_them() -> None:
    pattern = re.compile(r"^\s*(from|import)\s+personae\.integrations", re.MULTILINE)
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if "integrations" not in p.parts and pattern.search(p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


@pytest.mark.process
def test_import_personae_loads_no_framework() -> None:
    code = (
        "import sys, personae, personae.persona, personae.context, personae.store; "
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "[]"
