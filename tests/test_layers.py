"""Imports point one way: no cycles, no upward imports, the layer picture in the docs is fresh.

The graph comes from ``scripts/layers.py`` (``ast`` over ``src/personae``); the synthetic
trees below show that each check fails when it should.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from _layers import layers

# Known cycles (none left). The test below fails once one is gone, so an entry cannot
# outlive its reason.
KNOWN_CYCLES: list[list[str]] = []
KNOWN_UNREASONED: set[str] = set()


def _known(cycle: list[str]) -> bool:
    """Whether ``cycle`` lies inside one of the known cycles."""
    return any(set(cycle) <= set(known) for known in KNOWN_CYCLES)


@pytest.fixture(scope="module")
def figures() -> object:
    return layers.measure(layers.build())


def test_no_import_cycle_between_modules(figures: object) -> None:
    assert figures.module_cycles == []  # type: ignore[attr-defined]
    assert [c for c in figures.cycles_with_local if not _known(c)] == []  # type: ignore[attr-defined]
    assert [c for c in figures.cycles_all if not _known(c)] == []  # type: ignore[attr-defined]


def test_known_cycles_still_exist(figures: object) -> None:
    gone = [c for c in KNOWN_CYCLES if c not in figures.cycles_all]  # type: ignore[attr-defined]
    assert gone == [], f"remove {gone} from KNOWN_CYCLES"


def test_every_function_local_import_says_why() -> None:
    statements = layers.local_statements()
    unreasoned = [
        f"{m}:{line}" for m, line, ok in statements if not ok and m not in KNOWN_UNREASONED
    ]
    assert unreasoned == [], "add `# local import: <reason>` above, or move it to the top"
    still = {m for m, _, ok in statements if not ok}
    assert still == KNOWN_UNREASONED, f"remove {KNOWN_UNREASONED - still} from KNOWN_UNREASONED"


def test_every_package_has_a_layer(figures: object) -> None:
    assert figures.unplaced == []  # type: ignore[attr-defined]


def test_no_package_imports_a_higher_layer(figures: object) -> None:
    upward = [f"{i.source}:{i.line} -> {i.target}" for i in figures.upward]  # type: ignore[attr-defined]
    assert upward == []


def test_nothing_imports_cli() -> None:
    graph = layers.build()
    users = {
        i.source
        for i in graph.imports
        if layers.unit_of(i.target) == "cli" and layers.unit_of(i.source) not in {"cli", "__main__"}
    }
    assert users == set()


def test_architecture_doc_picture_is_fresh() -> None:
    text = layers.DOC.read_text(encoding="utf-8")
    assert layers.BEGIN in text and layers.END in text
    assert layers.render_doc(text, layers.build()) == text, (
        "docs/architecture.md is stale: run `python scripts/layers.py --write`"
    )


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    source = tmp_path / "personae"
    for name, body in files.items():
        path = source / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body, encoding="utf-8")
    return source


def test_checks_catch_a_cycle_an_upward_import_and_an_unreasoned_local_import(
    tmp_path: Path,
) -> None:
    source = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "errors.py": "from personae.cli import app\n",
            "cli/__init__.py": "",
            "cli/app.py": "import personae.errors\n",
            "tokens/__init__.py": "",
            "tokens/a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from personae.tokens.b import B\n"
            ),
            "tokens/b.py": (
                "def f():\n"
                "    from . import a\n"
                "def g():\n"
                "    # local import: start-up time\n"
                "    import json\n"
                "    import os\n"
                "\n"
                "    import re\n"
                "    x = 1\n"
                "    import sys\n"
            ),
        },
    )
    graph = layers.build(source)
    figures = layers.measure(graph)
    assert figures.module_cycles == [["personae.cli.app", "personae.errors"]]
    assert ["personae.tokens.a", "personae.tokens.b"] in figures.cycles_all
    assert ["personae.tokens.a", "personae.tokens.b"] not in figures.cycles_with_local
    assert [(i.source, i.target) for i in figures.upward] == [
        ("personae.errors", "personae.cli.app")
    ]
    assert [(i.source, i.reasoned) for i in figures.local] == [("personae.tokens.b", False)]
    statements = layers.local_statements(source)
    # one comment covers its run of imports (a blank line does not end it; code does)
    assert [(m, reasoned) for m, _, reasoned in statements] == [
        ("personae.tokens.b", False),
        ("personae.tokens.b", True),
        ("personae.tokens.b", True),
        ("personae.tokens.b", True),
        ("personae.tokens.b", False),
    ]


def test_the_picture_lists_layers_top_first_with_what_each_package_uses() -> None:
    picture = layers.picture(layers.build())
    lines = picture.splitlines()
    titles = [title for _, title in reversed(list(enumerate(t for t, _ in layers.LAYERS)))]
    found = [line.split(" ", 1)[1] for line in lines if line[:1].isdigit()]
    assert found == titles
    (errors_row,) = [line for line in lines if line.strip().startswith("errors ")]
    assert errors_row.endswith("(nothing)")
