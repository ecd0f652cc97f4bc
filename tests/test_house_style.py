"""House rules that hold for every module under src/."""

from __future__ import annotations

import ast
from pathlib import Path

from _layers import layers

SRC = Path(__file__).resolve().parents[1] / "src" / "personae"
MODULES = sorted(SRC.rglob("*.py"))


def test_there_are_modules() -> None:
    assert len(MODULES) > 10


def test_no_module_over_800_lines() -> None:
    too_long = {
        str(p.relative_to(SRC)): n
        for p in MODULES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800
    }
    assert too_long == {}


def test_public_modules_declare_all() -> None:
    missing = []
    for path in MODULES:
        if path.name.startswith("_") and path.name != "__init__.py":
            continue
        if path.name == "__main__.py" or (path.parent.name == "cli" and path.name == "__init__.py"):
            continue
        _, tree = layers.parse(path)
        names = {
            target.id
            for node in tree.body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Name)
        }
        if "__all__" not in names:
            missing.append(str(path.relative_to(SRC)))
    assert missing == []


def test_no_star_imports() -> None:
    offenders = [
        str(p.relative_to(SRC))
        for p in MODULES
        for node in ast.walk(layers.parse(p)[1])
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
    ]
    assert offenders == []


def test_nothing_imports_cli() -> None:
    offenders = []
    for path in MODULES:
        if "cli" in path.relative_to(SRC).parts or path.name == "__main__.py":
            continue
        for node in ast.walk(layers.parse(path)[1]):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("personae.cli"):
                offenders.append(str(path.relative_to(SRC)))
    assert offenders == []
