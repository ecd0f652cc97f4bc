"""Built-in lookup tools: list_dir, glob, grep (caps, filters, symlink safety)."""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from _helpers import builtin_subset as _subset
from _helpers import call_tool as call
from personae.errors import ToolError
from personae.tools import ToolRegistry, Workspace
from personae.tools._walk import glob_regex


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / ".git").mkdir()
    outside.mkdir()
    (outside / "leak.py").write_text("SECRET = 'needle'\n")
    (root / "src" / "main.py").write_text("import os\nprint('needle')\n")
    (root / "src" / "pkg" / "mod.py").write_text("def f():\n    return 'needle'\n")
    (root / "docs" / "guide.md").write_text("# Guide\nfind the needle here\n")
    (root / "docs" / "notes.txt").write_text("nothing\n")
    (root / ".git" / "config").write_text("needle in git\n")
    (root / "blob.bin").write_bytes(b"needle\x00\x01")
    (root / "outlink").symlink_to(outside)  # directory symlink: never entered
    (root / "src" / "leak.py").symlink_to(outside / "leak.py")  # file link leaving the root
    (root / "src" / "alias.py").symlink_to(root / "src" / "main.py")  # file link inside
    return root


def test_list_dir(tree: Path) -> None:
    tools = _subset(tree)
    listing = call(tools, "list_dir").splitlines()
    assert listing == [
        ".git/",
        "blob.bin",
        "docs/",
        "outlink -> " + str(tree.parent / "outside"),
        "src/",
    ]
    assert call(tools, "list_dir", path="docs").splitlines() == ["guide.md", "notes.txt"]
    (tree / "empty").mkdir()
    assert call(tools, "list_dir", path="empty") == "[empty is empty]"
    with pytest.raises(ToolError, match="outside the workspace"):
        call(tools, "list_dir", path="outlink")
    with pytest.raises(ToolError, match="not a directory"):
        call(tools, "list_dir", path="docs/guide.md")
    capped = _subset(tree, list_max_entries=2)
    assert call(capped, "list_dir").splitlines()[-1] == "[4 more entries not shown]"


def test_glob(tree: Path) -> None:
    tools = _subset(tree)
    assert call(tools, "glob", pattern="**/*.py").splitlines() == [
        "src/alias.py",
        "src/main.py",
        "src/pkg/mod.py",
    ]
    assert call(tools, "glob", pattern="*.py", path="src").splitlines() == [
        "src/alias.py",
        "src/main.py",
    ]
    assert call(tools, "glob", pattern="docs/*.{md,txt}").splitlines() == [
        "docs/guide.md",
        "docs/notes.txt",
    ]
    assert call(tools, "glob", pattern="**/*.rs") == "[no files match '**/*.rs']"
    for bad in ("../outside/*.py", "/etc/*"):
        with pytest.raises(ToolError, match="absolute or contain"):
            call(tools, "glob", pattern=bad)
    capped = _subset(tree, list_max_entries=1)
    assert call(capped, "glob", pattern="**/*.py").splitlines() == [
        "src/alias.py",
        "[2 more files not shown]",
    ]


def test_grep(tree: Path) -> None:
    tools = _subset(tree)
    hits = call(tools, "grep", pattern="needle").splitlines()
    assert hits == [
        "docs/guide.md:2: find the needle here",
        "src/alias.py:2: print('needle')",
        "src/main.py:2: print('needle')",
        "src/pkg/mod.py:2:     return 'needle'",
    ]  # not .git, not the binary, not the escaping link or the linked-out directory
    assert call(tools, "grep", pattern="NEEDLE", glob="*.md", ignore_case=True) == (
        "docs/guide.md:2: find the needle here"
    )
    assert call(tools, "grep", pattern=r"^def \w+", path="src/pkg/mod.py") == (
        "src/pkg/mod.py:1: def f():"
    )
    assert call(tools, "grep", pattern="absent") == "[no matches for 'absent']"
    capped = call(tools, "grep", pattern="needle", max_results=2).splitlines()
    assert capped[:2] == hits[:2]
    assert capped[2] == "[2 more matching lines not shown; narrow the search]"
    with pytest.raises(ToolError, match="invalid regular expression"):
        call(tools, "grep", pattern="(unclosed")
    with pytest.raises(ToolError, match="outside the workspace"):
        call(tools, "grep", pattern="needle", path="outlink")


def test_grep_limit_cannot_be_raised_by_the_model(tree: Path) -> None:
    tools = _subset(tree, grep_max_results=1)
    out = call(tools, "grep", pattern="needle", max_results=100).splitlines()
    assert len(out) == 2
    assert out[1].startswith("[3 more matching lines")


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="ab.*?", min_size=1, max_size=6),
    st.text(alphabet="ab.", max_size=6),
)
def test_property_glob_matches_fnmatch_on_names(pattern: str, name: str) -> None:
    """For single path segments our glob agrees with the standard library's fnmatch."""
    assert bool(glob_regex(pattern).match(name)) == fnmatch.fnmatchcase(name, pattern)


def test_glob_regex_path_rules() -> None:
    assert glob_regex("**/*.py").match("a.py")
    assert glob_regex("**/*.py").match("x/y/a.py")
    assert not glob_regex("*.py").match("x/a.py")
    assert glob_regex("src/**").match("src/a/b.txt")
    assert glob_regex("[!a]?.{md,txt}").match("bc.md")
    assert not glob_regex("[!a]?.{md,txt}").match("ac.md")


def test_tool_descriptions_and_schemas_fit_host_limits(tree: Path) -> None:
    for tool in ToolRegistry.builtin(Workspace(tree)):
        assert 0 < len(tool.description) <= 2048  # hosts cut tool descriptions at 2,048 chars
        schema = tool.parameters
        assert schema["type"] == "object"
        assert schema.get("additionalProperties") is False
        json.dumps(schema)


def test_walk_budget_stops_with_notice(tree: Path) -> None:
    tools = _subset(tree, walk_max_files=2)
    out = call(tools, "glob", pattern="**/*").splitlines()
    assert len(out) == 3
    assert out[-1] == "[stopped after looking at 2 files; search a narrower path]"
    assert call(tools, "grep", pattern="absent").endswith(
        " [stopped after looking at 2 files; search a narrower path]"
    )


@settings(max_examples=500, deadline=None)
@example("[^a]", "^")
@example("[!]]", "a")
@example("[]a]", "]")
@example("[[]", "[")
@given(
    st.text(alphabet="ab[]!^-\\*?", min_size=1, max_size=7),
    st.text(alphabet="ab[]!^-\\", max_size=5),
)
def test_property_bracket_classes_match_fnmatch(pattern: str, name: str) -> None:
    """Bracket classes ('[!a]', '[]a]', '[^a]', '[[]') agree with fnmatch, or the pattern
    is refused as invalid (a reversed range such as '[b-a]')."""
    import re

    try:
        ours = glob_regex(pattern)
    except re.error:
        assert re.search(r"\[!?\]?[^]]*-", pattern)  # only a bad range may be refused
        return
    assert bool(ours.match(name)) == fnmatch.fnmatchcase(name, pattern)


def test_invalid_glob_is_a_clear_tool_error(tree: Path) -> None:
    tools = _subset(tree)
    with pytest.raises(ToolError) as info:
        call(tools, "glob", pattern="[z-a]")
    assert str(info.value) == "glob: invalid glob pattern '[z-a]': bad character range z-a"
    with pytest.raises(ToolError, match="invalid glob pattern"):
        call(tools, "grep", pattern="x", glob="*.[z-a]")
    assert call(tools, "glob", pattern="[]") == "[no files match '[]']"
