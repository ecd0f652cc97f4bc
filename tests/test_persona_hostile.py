"""Hostile or odd persona files: YAML alias bombs, deep nesting, FIFOs, huge files.

Each must give one clear ``file:line: message`` (or load), never hang, crash
or blow up memory later (``show --json``, ``export``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from _helpers import clean_cast, run_personae, write
from personae.persona import Cast
from personae.persona._files import MAX_READ_BYTES

GOOD = "---\nname: good\ndescription: A fine persona.\ntools: [read_file]\n---\nHello.\n"

BOMB = (
    "---\nname: bomb\ndescription: d\na: &a [x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{k}: &{k} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, k in zip("abcdefgh", "bcdefghi", strict=True)
    )
    + "---\nbody\n"
)


def personae(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_personae(*args, cwd=cwd)


@pytest.mark.parametrize("folder", [".personae/personas", ".claude/agents"])
@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "---\nname: rec\ndescription: d\na: &a [1, *a]\n---\n",
            4,
            "frontmatter holds a recursive YAML alias (a value that contains itself)",
        ),
        (BOMB, 9, "frontmatter too large: more than 100000 values (YAML aliases expanded)"),
        (
            "---\nname: deep\ndescription: d\na: " + "[" * 500 + "]" * 500 + "\n---\n",
            4,
            "frontmatter nested too deeply (more than 50 levels)",
        ),
    ],
)
def test_yaml_alias_bombs_and_deep_nesting_are_errors(
    tmp_path: Path, folder: str, text: str, line: int, message: str
) -> None:
    write(tmp_path / ".personae/personas/good.md", GOOD)
    bad = write(tmp_path / folder / "bad.md", text)
    cast = Cast.load(tmp_path)
    assert [str(e) for e in cast.errors] == [f"{bad}:{line}: {message}"]
    assert sorted(cast.personas) == ["good"]


def test_shared_aliases_that_stay_small_still_load(tmp_path: Path) -> None:
    cast = clean_cast(
        tmp_path,
        ".personae/personas/a.md",
        "---\nname: a\ndescription: d\nconstraints:\n  safety_rules: &r [no secrets]\n"
        "  mandatory_steps: *r\n---\n",
    )
    assert cast.get("a").constraints.mandatory_steps == ["no secrets"]


@pytest.mark.process
def test_recursive_alias_cli_show_json_has_no_traceback(tmp_path: Path) -> None:
    write(tmp_path / "agents/rec.md", "---\nname: rec\ndescription: d\na: &a [1, *a]\n---\n")
    check = personae("personas", "check", "--dir", "agents", cwd=tmp_path)
    assert check.returncode == 1
    assert "recursive YAML alias" in check.stdout
    show = personae("personas", "show", "rec", "--dir", "agents", "--json", cwd=tmp_path)
    assert show.returncode == 1
    assert "Traceback" not in show.stderr
    # the persona's file is there but did not load: show says why, in one line
    assert show.stderr.startswith(f"personae: error: {tmp_path / 'agents/rec.md'}:4: ")
    assert "recursive YAML alias" in show.stderr and len(show.stderr.splitlines()) == 1
    listed = personae("personas", "list", "--dir", "agents", "--json", cwd=tmp_path)
    assert json.loads(listed.stdout) == []


@pytest.mark.parametrize("folder", [".personae/personas", ".claude/agents"])
@pytest.mark.process
def test_fifo_named_md_is_an_error_not_a_hang(tmp_path: Path, folder: str) -> None:
    write(tmp_path / ".personae/personas/good.md", GOOD)
    fifo = tmp_path / folder / "pipe.md"
    fifo.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(fifo)
    result = personae("personas", "check", "--root", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 1
    assert f"{fifo}: error: cannot read file: not a regular file" in result.stdout
    assert "checked 1 personas" in result.stdout


def test_oversized_file_is_an_error(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/good.md", GOOD)
    big = write(
        tmp_path / ".personae/personas/big.md",
        "---\nname: big\ndescription: d\n---\n" + "x" * MAX_READ_BYTES,
    )
    cast = Cast.load(tmp_path)
    assert [str(e) for e in cast.errors] == [f"{big}: cannot read file: larger than 8 MiB"]
    assert sorted(cast.personas) == ["good"]


def test_bom_and_crlf_load_like_plain_files(tmp_path: Path) -> None:
    path = tmp_path / ".personae/personas/w.md"
    path.parent.mkdir(parents=True)
    path.write_bytes(
        b"\xef\xbb\xbf---\r\nname: w\r\ndescription: d\r\ntools: Read, Foo\r\n---\r\nA\r\nB\r\n"
    )
    cast = Cast.load(tmp_path)
    assert [str(e) for e in cast.errors] == [
        f"{path}:4: unknown tool 'Foo' (valid: agent, edit_file, glob, grep, "
        "handover_to_persona, list_dir, read_file, run_shell, web_fetch, write_file)"
    ]
    path.write_bytes(b"\xef\xbb\xbf---\r\nname: w\r\ndescription: d\r\n---\r\nA\r\nB\r\n")
    assert Cast.load(tmp_path).get("w").system_prompt == "A\nB\n"


def test_directory_named_like_a_persona_file_is_walked_not_read(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/good.md", GOOD)
    write(tmp_path / ".personae/personas/odd.md/inner.md", GOOD.replace("good", "inner"))
    cast = Cast.load(tmp_path)
    assert cast.errors == []
    assert sorted(cast.personas) == ["good", "inner"]


def test_plugin_folder_symlinked_outside_is_one_error(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / ".claude-plugin/plugin.json", '{"name":"p","description":"d","version":"1"}')
    write(outside / "agents/evil.md", "---\nname: evil\ndescription: from outside\n---\n")
    write(outside / "skills/s/SKILL.md", "---\nname: s\ndescription: outside\n---\n")
    project = tmp_path / "proj"
    link = project / ".claude/plugins/evil"
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    cast = Cast.load(project)
    assert [str(e) for e in cast.errors] == [
        f"{link}: symlink escapes the project root {project} (points to {outside}); skipped"
    ]
    assert cast.personas == {} and cast.skills == {}
