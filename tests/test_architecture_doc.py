"""The layout list in docs/architecture.md names every file and folder of the package.

A reader finds each part of ``src/personae/`` in the list, and nothing listed is gone: a
package or module added, renamed or removed without the list following fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "personae"
DOC = ROOT / "docs" / "architecture.md"
ENTRY = re.compile(r"^  (\S+)\s{2,}\S")


def listed_entries() -> list[str]:
    """The names listed under ``src/personae/`` in the doc's layout block."""
    text = DOC.read_text(encoding="utf-8")
    block = text.split("```\nsrc/personae/\n", 1)[1].split("```", 1)[0]
    names = []
    for line in block.splitlines():
        if not line.startswith("  "):
            break  # the next top-level folder (tests/, bench/ ...) ends the package's list
        match = ENTRY.match(line)
        assert match, f"docs/architecture.md: layout line without a description: {line!r}"
        names.append(match.group(1))
    return names


def package_entries() -> set[str]:
    """Every module and folder directly in ``src/personae/`` (caches excluded)."""
    out = set()
    for path in PACKAGE.iterdir():
        if path.name == "__pycache__" or path.name.startswith("."):
            continue
        if path.is_dir():
            out.add(path.name + "/")
        elif path.suffix == ".py":
            out.add(path.name)
    return out


def test_every_package_and_module_is_listed_once() -> None:
    listed = listed_entries()
    twice = sorted({n for n in listed if listed.count(n) > 1})
    assert not twice, f"docs/architecture.md lists twice: {twice}"
    actual = package_entries()
    missing, gone = sorted(actual - set(listed)), sorted(set(listed) - actual)
    assert not missing, f"docs/architecture.md does not list: {missing}"
    assert not gone, f"docs/architecture.md lists what is gone: {gone}"


def test_the_list_covers_all_packages() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert len(packages) >= 18
    assert {n.rstrip("/") for n in listed_entries() if n.endswith("/")} >= packages


DESIGN_DOC_REF = re.compile(r"\bseeds?[ _-]?\d{3}", re.IGNORECASE)
SCANNED = ("src", "docs", "tests", "bench", "scripts", "README.md")


def test_no_reference_to_numbered_design_documents() -> None:
    """Code, docs, tests and help name the behaviour, never a numbered design document
    that is not in the repository."""
    found = []
    for top in SCANNED:
        base = ROOT / top
        for path in [base] if base.is_file() else sorted(base.rglob("*")):
            if (
                not path.is_file()
                or "__pycache__" in path.parts
                or path.suffix in {".pyc", ".gguf"}
            ):
                continue
            try:
                text = path.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if DESIGN_DOC_REF.search(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not found, "numbered design-document references:\n" + "\n".join(found)
