"""`personae personas ...` and `personae init`: exit codes, output, export round trip."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from _helpers import personae_cli, write
from personae.cli.app import app
from personae.persona import Cast
from personae.persona.scaffold import example_files

runner = CliRunner()


def personae(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    result = runner.invoke(app, ["init", str(tmp_path)])
    assert result.exit_code == 0, result.output
    return tmp_path


def test_init_scaffolds_and_is_idempotent(tmp_path: Path) -> None:
    first = personae("init", "proj", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    root = tmp_path / "proj"
    expected = {rel for rel, _ in example_files()}
    written = {p.relative_to(root) for p in root.rglob("*") if p.is_file()}
    assert written == expected
    assert len(list((root / ".personae/personas").glob("*.md"))) >= 3
    assert len(list((root / ".personae/skills").glob("*/SKILL.md"))) >= 2
    assert (root / ".personae/directive.md").is_file()
    assert f"created {len(expected)} files" in first.stdout
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}
    second = personae("init", "proj", cwd=tmp_path)
    assert second.returncode == 0
    assert "nothing to do" in second.stdout
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()} == before


def test_init_never_overwrites_a_changed_file(project: Path) -> None:
    mine = project / ".personae/personas/writer.md"
    mine.write_text("my own writer\n")
    (project / ".personae/directive.md").unlink()
    result = runner.invoke(app, ["init", str(project)])
    assert result.exit_code == 0
    assert mine.read_text() == "my own writer\n"
    assert "kept" in result.output and "writer.md" in result.output
    assert (project / ".personae/directive.md").is_file()
    assert "created 1 file in" in result.output


def test_init_into_a_file_is_an_error(tmp_path: Path) -> None:
    target = write(tmp_path / "f", "x")
    result = personae("init", str(target), cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == f"personae: error: {target}: not a directory"


def test_list_text_and_json(project: Path) -> None:
    result = personae("personas", "list", cwd=project)
    assert result.returncode == 0, result.stderr
    for name in ("analyst", "researcher", "writer"):
        assert name in result.stdout
    data = json.loads(
        runner.invoke(app, ["personas", "list", "--json", "--root", str(project)]).stdout
    )
    assert [p["name"] for p in data] == ["analyst", "researcher", "writer"]
    assert data[0]["tools"] == ["read_file", "grep", "glob", "list_dir"]


def test_list_with_dirs(project: Path, tmp_path: Path) -> None:
    write(tmp_path / "extra/agents/helper.md", "---\nname: helper\ndescription: Helps.\n---\n")
    result = runner.invoke(
        app,
        [
            "personas",
            "list",
            "--json",
            "--root",
            str(project),
            "--dir",
            str(tmp_path / "extra/agents"),
        ],
    )
    assert result.exit_code == 0
    assert "helper" in [p["name"] for p in json.loads(result.stdout)]


def test_show_text_json_and_unknown(project: Path) -> None:
    text = runner.invoke(app, ["personas", "show", "researcher", "--root", str(project)])
    assert text.exit_code == 0
    assert "temp workspace:    yes" in text.stdout
    assert "You are the researcher" in text.stdout
    data = json.loads(
        runner.invoke(app, ["personas", "show", "analyst", "--json", "--root", str(project)]).stdout
    )
    assert data["max_steps"] == 12 and data["context"] == "summary_recent"
    assert data["context_default"] is False and "last 6 messages" in data["context_gives"]
    # What a spawned child gets is said where it is chosen.
    assert "context:           isolated: only the task" in text.stdout
    assert data["skill_details"][0]["name"] == "csv-insights"
    bad = personae("personas", "show", "analist", cwd=project)
    assert bad.returncode == 2  # an argument naming no persona is usage
    assert "did you mean 'analyst'" in bad.stderr
    assert "Traceback" not in bad.stderr
    # The bundled personas a run can use are shown too (and named among the valid ones).
    bundled = runner.invoke(app, ["personas", "show", "repo-researcher", "--root", str(project)])
    assert bundled.exit_code == 0 and "(bundled)" in bundled.stdout
    assert "repo-researcher" in bad.stderr


def test_check_exit_codes(project: Path) -> None:
    ok = personae("personas", "check", cwd=project)
    assert ok.returncode == 0
    assert "checked 3 personas, 2 skills: 0 errors, 0 warnings" in ok.stdout
    # A Claude Code tool personae lacks: Claude Code is silent, so a note (one line per
    # kind), not a warning; --strict passes.
    write(
        project / ".claude/agents/web.md", "---\nname: web\ndescription: d\ntools: WebSearch\n---\n"
    )
    noted = personae("personas", "check", cwd=project)
    assert noted.returncode == 0
    assert (
        "note: 1 file name tools personae does not provide (left out of their tools): web.md"
        in noted.stdout
    ) and "0 errors, 0 warnings" in noted.stdout
    strict = runner.invoke(app, ["personas", "check", "--strict", "--root", str(project)])
    assert strict.exit_code == 0
    # A warning (an MCP server's tool, the server not configured): exit 0, 1 with --strict.
    write(
        project / ".claude/agents/post.md",
        "---\nname: post\ndescription: d\ntools: mcp__ledger__post\n---\n",
    )
    warn = personae("personas", "check", cwd=project)
    assert warn.returncode == 0
    assert (
        f"{project / '.claude/agents/post.md'}:4: warning: tools personae does not provide"
        in warn.stdout
    )
    strict = runner.invoke(app, ["personas", "check", "--strict", "--root", str(project)])
    assert strict.exit_code == 1
    # Two errors in two files: both reported, exit 1.
    write(project / ".personae/personas/bad1.md", "---\nname: bad1\n---\n")
    write(
        project / ".personae/personas/bad2.md",
        "---\nname: bad2\ndescription: d\ntools: [raed_file]\n---\n",
    )
    bad = personae("personas", "check", cwd=project)
    assert bad.returncode == 1
    assert (
        f"{project / '.personae/personas/bad1.md'}:1: error: missing required field" in bad.stdout
    )
    assert (
        f"{project / '.personae/personas/bad2.md'}:4: error: unknown tool 'raed_file'" in bad.stdout
    )
    assert "2 errors, 1 warnings" in bad.stdout
    data = json.loads(
        runner.invoke(app, ["personas", "check", "--json", "--root", str(project)]).stdout
    )
    assert data["errors"] == 2 and data["notes"] == 1
    assert {p["severity"] for p in data["problems"]} == {"error", "warning", "note"}


def test_check_bad_usage_exits_2(project: Path) -> None:
    result = personae("personas", "check", "--no-such-flag", cwd=project)
    assert result.returncode == 2


ROUND_TRIP_CLAUDE = """---
name: reviewer
description: "Reviews pull requests. Examples: <example>Context: a PR</example>"
tools: Read, Grep, Bash, WebSearch, mcp__github__get_pr, Task
disallowedTools: Write
model: opus
maxTurns: 9
skills: [checklist]
mcpServers:
  - github
color: purple
---
You review code.

Be kind.
"""


@pytest.mark.parametrize("name", ["analyst", "researcher", "writer", "reviewer"])
def test_export_round_trip(project: Path, tmp_path: Path, name: str) -> None:
    write(project / ".claude/agents/reviewer.md", ROUND_TRIP_CLAUDE)
    write(
        project / ".personae/skills/checklist/SKILL.md",
        "---\nname: checklist\ndescription: d\n---\n",
    )
    original = Cast.load(project).get(name)
    out = tmp_path / "exported" / ".claude/agents" / f"{name}.md"
    out.parent.mkdir(parents=True)
    result = personae(
        "personas", "export", name, "--format", "claude-code", "--out", str(out), cwd=project
    )
    assert result.returncode == 0, result.stderr
    write(
        tmp_path / "exported/.personae/skills/checklist/SKILL.md",
        "---\nname: checklist\ndescription: d\n---\n",
    )
    write(
        tmp_path / "exported/.personae/skills/csv-insights/SKILL.md",
        "---\nname: csv-insights\ndescription: d\n---\n",
    )
    write(
        tmp_path / "exported/.personae/skills/report-writing/SKILL.md",
        "---\nname: report-writing\ndescription: d\n---\n",
    )
    again = Cast.load(tmp_path / "exported")
    assert again.errors == []
    back = again.get(name)
    skip = {"source", "source_kind"}
    assert back.model_dump(exclude=skip) == original.model_dump(exclude=skip)
    assert back.source_kind == "claude-code"


def test_export_shape_is_claude_code(project: Path) -> None:
    result = runner.invoke(
        app, ["personas", "export", "analyst", "--format", "claude-code", "--root", str(project)]
    )
    assert result.exit_code == 0
    head = result.stdout.split("---")[1]
    assert "tools: Read, Grep, Glob, LS" in head
    assert "disallowedTools: Write, Edit" in head
    assert "maxTurns: 12" in head
    assert result.stdout.rstrip().endswith("and any caveat.")


def test_export_unknown_format(project: Path) -> None:
    result = personae("personas", "export", "analyst", "--format", "yaml", cwd=project)
    assert result.returncode == 2  # usage: one line naming the closest format
    assert "unknown export format 'yaml'" in result.stderr


@pytest.mark.parametrize("umask", [0o022, 0o027])
@pytest.mark.process
def test_init_and_export_files_get_the_umask_mode(tmp_path: Path, umask: int) -> None:
    """New user files are 0666 & ~umask (not mkstemp's 0600); a replaced file keeps its mode."""
    script = (
        "import os, sys, runpy; os.umask(int(sys.argv[1], 8)); sys.argv = sys.argv[1:]; "
        "sys.argv[0] = 'personae'; runpy.run_module('personae', run_name='__main__')"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script, oct(umask), *args],
            check=False,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )

    assert run("init", "proj").returncode == 0
    root = tmp_path / "proj"
    modes = {stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*") if p.is_file()}
    assert modes == {0o666 & ~umask}
    out = tmp_path / "agent.md"

    def export(name: str) -> subprocess.CompletedProcess[str]:
        options = ("--format", "claude-code", "--root", "proj", "--out", str(out))
        return run("personas", "export", name, *options)

    result = export("writer")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask
    out.chmod(0o640)
    assert export("analyst").returncode == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert "name: analyst" in out.read_text()


def test_missing_or_file_root_is_bad_usage(tmp_path: Path) -> None:
    write(tmp_path / "f", "x")
    for args in (("list",), ("check",), ("show", "x"), ("export", "x", "--format", "claude-code")):
        for root in ("nope", "f"):
            result = personae("personas", *args, "--root", root, cwd=tmp_path)
            assert result.returncode == 2, (args, root, result.stdout)
            assert "Invalid value for '--root'" in result.stderr
            assert "Traceback" not in result.stderr


def test_init_with_a_file_in_the_way_names_it_and_writes_nothing(tmp_path: Path) -> None:
    write(tmp_path / "p/.personae/skills", "not a folder")
    result = personae("init", "p", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"personae: error: {Path('p/.personae/skills')}: not a directory (a file is in the way)"
    )
    assert [q.name for q in (tmp_path / "p").rglob("*")] == [".personae", "skills"]


def test_list_shows_rich_markup_in_descriptions_literally(tmp_path: Path) -> None:
    write(
        tmp_path / "agents/m.md",
        '---\nname: m\ndescription: "see [/x] and [bold]b[/bold]"\n---\nbody\n',
    )
    result = personae("personas", "list", "--dir", "agents", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "see [/x] and [bold]b[/bold]" in result.stdout
    assert "Traceback" not in result.stderr


def test_terminal_escapes_from_files_are_shown_not_sent(tmp_path: Path) -> None:
    write(
        tmp_path / "agents/a.md",
        '---\nname: a\ndescription: "evil \\e]0;pwned\\a \\e[2J desc"\n---\nbody \x1b[31mred\n',
    )
    for args in (("list",), ("show", "a")):
        result = personae("personas", *args, "--dir", "agents", cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout and "\x07" not in result.stdout
        assert "evil \\x1b]0;pwned\\x07 \\x1b[2J desc" in result.stdout
    assert "body \\x1b[31mred" in result.stdout
