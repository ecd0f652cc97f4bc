"""Test modules share helpers through ``_*.py`` support modules and ``conftest.py``, never by
importing another test module (which would run its module code twice under two names and tie
one file's tests to another's internals)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def imported_test_modules(source: str) -> list[str]:
    """The ``test_*`` modules ``source`` imports (``import`` and ``from`` forms, anywhere)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.split(".")[0].startswith("test_")]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0].startswith("test_")
        ):
            found.append(node.module)
    return found


def test_no_imported_test_modules_another() -> None:
    offenders = {
        path.name: names
        for path in sorted(TESTS.rglob("*.py"))
        if (names := imported_test_modules(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_the_check_sees_every_form_of_import() -> None:
    source = (
        "import test_a\n"
        "import os, test_b.sub as b\n"
        "from test_c import x\n"
        "def f():\n    from test_d import y\n"
        "from _helpers import z\nfrom . import test_e\n"
    )
    assert imported_test_modules(source) == ["test_a", "test_b.sub", "test_c", "test_d"]
