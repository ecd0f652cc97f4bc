"""Every loader into the same Persona/Skill model, through the public Cast API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _helpers import clean_cast, write
from personae.persona import Cast, ContextMode
from personae.persona.loader import load_persona_file
from personae.persona.problems import Problem

PERSONAE_FILE = """---
name: auditor
description: Checks the books.
tools: [read_file, Grep, mcp__ledger__lookup]
disallowed_tools: [write_file]
model: openai:gpt-4o
max_steps: 7
needs_temp_workspace: true
context: fork
skills: [csv-check]
mcp_servers:
  ledger: {command: ledger-mcp}
version: 2
constraints:
  mandatory_steps: [Open the ledger first]
  required_tools: [read_file]
  safety_rules: [Never write]
  validation_guidance: Totals must match.
---
You audit.

"""
PERSONAE_FILE += "Line two, kept verbatim.   \n"

SKILL = """---
name: csv-check
description: Checks CSV files for bad totals.
allowed-tools: Read Grep
license: MIT
constraints:
  mandatory_steps: [Count rows]
---
# L2 body
Do the thing.
"""


def test_personae_file_loads_every_field(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/auditor.md", PERSONAE_FILE)
    write(tmp_path / ".personae/skills/csv-check/SKILL.md", SKILL)
    cast = Cast.load(tmp_path)
    assert cast.problems == []
    p = cast.get("auditor")
    assert p.description == "Checks the books."
    assert p.tools == ["read_file", "grep", "mcp__ledger__lookup"]
    assert p.disallowed_tools == ["write_file"]
    assert p.model == "openai:gpt-4o"
    assert p.max_steps == 7
    assert p.needs_temp_workspace is True
    assert p.context is ContextMode.FORK
    assert p.skills == ["csv-check"]
    assert p.mcp_servers == {"ledger": {"command": "ledger-mcp"}}
    assert p.version == "2"
    assert p.constraints.mandatory_steps == ["Open the ledger first"]
    assert p.constraints.validation_guidance == "Totals must match."
    assert p.system_prompt == "You audit.\n\nLine two, kept verbatim.   \n"
    assert p.source_kind == "personae"
    assert p.source == tmp_path / ".personae/personas/auditor.md"


def test_defaults_when_fields_absent(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/x.md", "---\nname: x\ndescription: d\n---\nbody\n")
    p = Cast.load(tmp_path).get("x")
    assert p.tools is None
    assert p.context is ContextMode.BRIEF
    assert p.max_steps is None
    assert p.needs_temp_workspace is False


@pytest.mark.parametrize(
    ("tools", "expected"),
    [
        ("Read, Grep, Glob", ["read_file", "grep", "glob"]),
        ("[Read, Bash, Edit, MultiEdit]", ["read_file", "run_shell", "edit_file"]),
        ("Task, WebFetch, LS, Write", ["agent", "web_fetch", "list_dir", "write_file"]),
    ],
)
def test_claude_tools_comma_string_or_list(tmp_path: Path, tools: str, expected: list[str]) -> None:
    cast = clean_cast(
        tmp_path, ".claude/agents/a.md", f"---\nname: a\ndescription: d\ntools: {tools}\n---\n"
    )
    assert cast.get("a").tools == expected
    assert cast.get("a").source_kind == "claude-code"


def test_claude_file_fields_and_unknown_keys(tmp_path: Path) -> None:
    cast = clean_cast(
        tmp_path,
        ".claude/agents/rev.md",
        "---\nname: code-reviewer\ndescription: Reviews code.\ntools: Read, WebSearch, "
        "mcp__github__get_pr, chrome-mcp\ndisallowedTools: Write, Edit\nmodel: sonnet\n"
        "maxTurns: 5\nskills: [a-skill]\nmcpServers: [github]\ncolor: blue\npriority: high\n"
        "---\nReview carefully.\n",
    )
    p = cast.get("code-reviewer")
    assert p.tools == ["read_file", "mcp__github__get_pr"]  # github configured by the persona
    assert p.unavailable_tools == ["WebSearch", "chrome-mcp"]
    assert p.disallowed_tools == ["write_file", "edit_file"]
    assert p.model == "sonnet"
    assert p.max_steps == 5
    assert p.mcp_servers == {"github": {}}
    assert p.extra == {"color": "blue", "priority": "high"}
    texts = [str(w) for w in cast.warnings]
    # Tool names personae has no counterpart of: Claude Code is silent, a note here.
    noted = [str(n) for n in cast.notes]
    assert any("WebSearch, chrome-mcp" in t and "left out" in t for t in noted)
    assert not any("left out" in t for t in texts)
    assert any("unknown field 'priority' kept as is (personae ignores it)" in t for t in texts)
    assert not any("'color'" in t for t in texts)  # a documented Claude Code key
    assert any("unknown skill 'a-skill'" in t for t in texts)  # a warning in Claude files


@pytest.mark.parametrize("model", ["sonnet", "opus", "haiku", "inherit", "claude-opus-4-1"])
def test_claude_model_values(tmp_path: Path, model: str) -> None:
    write(tmp_path / ".claude/agents/m.md", f"---\nname: m\ndescription: d\nmodel: {model}\n---\n")
    assert Cast.load(tmp_path).get("m").model == model


def test_unconfigured_mcp_tool_is_unavailable_in_claude_file(tmp_path: Path) -> None:
    write(tmp_path / ".claude/agents/a.md", "---\nname: a\ndescription: d\ntools: mcp__x__y\n---\n")
    cast = Cast.load(tmp_path)
    assert cast.get("a").tools == []
    assert cast.get("a").unavailable_tools == ["mcp__x__y"]
    assert "MCP servers not configured: x" in str(cast.warnings[0])


def test_project_mcp_json_configures_servers(tmp_path: Path) -> None:
    write(tmp_path / ".mcp.json", json.dumps({"mcpServers": {"x": {"command": "x"}}}))
    write(
        tmp_path / ".personae/personas/a.md",
        "---\nname: a\ndescription: d\ntools: [mcp__x__y, mcp__x]\n---\n",
    )
    cast = Cast.load(tmp_path)
    assert cast.problems == []
    assert cast.get("a").tools == ["mcp__x__y", "mcp__x"]
    assert cast.mcp_servers == {"x": {"command": "x"}}


def test_lenient_yaml_like_claude_code(tmp_path: Path) -> None:
    # Real agent files put "Examples: <example>Context: ..." in a plain YAML value.
    cast = clean_cast(
        tmp_path,
        ".claude/agents/gen.md",
        "---\nname: gen\ndescription: Use this agent to generate things. Examples: "
        "<example>Context: user asks</example>\ntools: Read\n---\nbody\n",
    )
    assert "Context: user asks" in cast.get("gen").description
    assert "read leniently" in str(cast.notes[0])  # Claude Code reads it without a word
    assert cast.warnings == []


def test_claude_markdown_without_frontmatter_is_skipped_with_warning(tmp_path: Path) -> None:
    cast = clean_cast(tmp_path, ".claude/agents/NOTES.md", "# just notes\n")
    assert cast.personas == {}
    assert str(cast.warnings[0]).endswith("not an agent file, skipped")


def test_claude_agents_subfolders_are_loaded(tmp_path: Path) -> None:
    write(tmp_path / ".claude/agents/core/deep/a.md", "---\nname: a\ndescription: d\n---\n")
    assert "a" in Cast.load(tmp_path).personas


def test_skill_l1_eager_l2_l3_on_demand(tmp_path: Path) -> None:
    folder = tmp_path / ".personae/skills/csv-check"
    write(folder / "SKILL.md", SKILL)
    write(folder / "ref/guide.md", "guide")
    write(folder / "scripts/run.py", "print(1)")
    cast = Cast.load(tmp_path)
    skill = cast.skill("csv-check")
    assert skill.description == "Checks CSV files for bad totals."
    assert skill.allowed_tools == ["read_file", "grep"]
    assert skill.constraints.mandatory_steps == ["Count rows"]
    assert skill.extra == {"license": "MIT"}
    assert skill.body() == "# L2 body\nDo the thing.\n"
    assert skill.files() == [Path("ref/guide.md"), Path("scripts/run.py")]
    # L2 is read from disk when asked, not cached at load time.
    (folder / "SKILL.md").write_text(SKILL.replace("Do the thing.", "Changed."))
    assert "Changed." in skill.body()


def test_skill_allowed_tools_camel_case_and_list(tmp_path: Path) -> None:
    write(
        tmp_path / ".claude/skills/s/SKILL.md",
        "---\nname: s\ndescription: d\nallowedTools: [Read, Bash]\n---\n",
    )
    assert Cast.load(tmp_path).skill("s").allowed_tools == ["read_file", "run_shell"]


def make_plugin(folder: Path, *, mcp: object) -> None:
    write(
        folder / ".claude-plugin/plugin.json",
        json.dumps({"name": "books", "description": "Bookkeeping", "version": "1.2.0"}),
    )
    write(folder / ".mcp.json", json.dumps(mcp))
    write(
        folder / "agents/clerk.md",
        "---\nname: clerk\ndescription: Files receipts.\n"
        "tools: Read, mcp__ledger__add\n---\nClerk.\n",
    )
    write(folder / "skills/receipts/SKILL.md", "---\nname: receipts\ndescription: Receipts.\n---\n")


@pytest.mark.parametrize(
    "mcp",
    [{"mcpServers": {"ledger": {"command": "ledger"}}}, {"ledger": {"command": "ledger"}}],
)
def test_plugin_dir_via_dir_option(tmp_path: Path, mcp: object) -> None:
    plugin = tmp_path / "plugin"
    make_plugin(plugin, mcp=mcp)
    cast = Cast.load(tmp_path / "empty", [plugin])
    assert cast.problems == []
    clerk = cast.get("clerk")
    assert clerk.source_kind == "plugin"
    assert clerk.tools == ["read_file", "mcp__ledger__add"]
    assert cast.skill("receipts").path == plugin / "skills/receipts/SKILL.md"
    assert cast.mcp_servers == {"ledger": {"command": "ledger"}}


def test_plugin_in_project_plugins_folder(tmp_path: Path) -> None:
    make_plugin(tmp_path / ".claude/plugins/books", mcp={})
    cast = Cast.load(tmp_path)
    assert "books:clerk" in cast.personas  # named as Claude Code lists it
    assert cast.get("clerk") is cast.get("books:clerk")  # the unique bare name finds it
    assert cast.get("clerk").unavailable_tools == ["mcp__ledger__add"]


def test_plugin_manifest_needs_only_a_name_as_in_claude_code(tmp_path: Path) -> None:
    plugin = tmp_path / "p"
    make_plugin(plugin, mcp={})
    write(plugin / ".claude-plugin/plugin.json", json.dumps({"name": "books"}))
    cast = Cast.load(tmp_path / "empty", [plugin])
    assert cast.errors == []  # no version, no description: Claude Code loads it too
    assert "books:clerk" in cast.personas
    write(plugin / ".claude-plugin/plugin.json", json.dumps({"version": "1.0.0"}))
    cast = Cast.load(tmp_path / "empty", [plugin])
    messages = [str(e) for e in cast.errors]
    assert any("missing required field 'name'" in m for m in messages)
    assert "clerk" in cast.personas  # the rest of the plugin still loads


def test_plugin_bad_json_has_line(tmp_path: Path) -> None:
    plugin = tmp_path / "p"
    make_plugin(plugin, mcp={})
    write(plugin / ".claude-plugin/plugin.json", '{\n  "name": "x",\n  oops\n}')
    cast = Cast.load(tmp_path / "empty", [plugin])
    assert str(cast.errors[0]).startswith(
        f"{plugin / '.claude-plugin/plugin.json'}:3: malformed JSON"
    )


def test_dir_named_personas_is_strict(tmp_path: Path) -> None:
    write(tmp_path / "extra/personas/a.md", "---\nname: a\ndescription: d\ntools: WebSearch\n---\n")
    write(tmp_path / "agents/b.md", "---\nname: b\ndescription: d\ntools: WebSearch\n---\n")
    cast = Cast.load(tmp_path / "empty", [tmp_path / "extra/personas", tmp_path / "agents"])
    assert "a" not in cast.personas and "b" in cast.personas
    assert any("unknown tool 'WebSearch'" in str(e) for e in cast.errors)


def test_load_persona_file_directly(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", "---\nname: a\ndescription: d\ntools: Read\n---\nHi\n")
    problems: list[Problem] = []
    loaded = load_persona_file(path, kind="claude-code", root=tmp_path, problems=problems)
    assert loaded is not None and loaded.persona.tools == ["read_file"]
    assert loaded.lines["tools"] == 4
    assert problems == []


def test_claude_tool_argument_patterns_fail_closed(tmp_path: Path) -> None:
    # personae cannot enforce "only git commands": the allowed entry is left out,
    # while a denied pattern denies the whole tool.
    write(
        tmp_path / ".claude/agents/g.md",
        "---\nname: g\ndescription: d\ntools: Bash(git status:*), Read, Edit\n"
        "disallowedTools: Edit(src/**)\n---\n",
    )
    cast = Cast.load(tmp_path)
    g = cast.get("g")
    assert g.tools == ["read_file", "edit_file"]
    assert g.unavailable_tools == ["Bash(git status:*)"]
    assert g.disallowed_tools == ["edit_file"]
    texts = [str(w) for w in cast.warnings]
    assert any("Bash(git status:*)" in t and "left out" in t for t in texts)
    assert any("whole tool denied" in t for t in texts)


def test_personae_file_tool_pattern_is_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".personae/personas/p.md",
        "---\nname: p\ndescription: d\ntools: [run_shell(git:*)]\n---\n",
    )
    cast = Cast.load(tmp_path)
    assert [str(e) for e in cast.errors] == [
        f"{path}:4: tool 'run_shell(git:*)': argument patterns cannot be enforced; tool left out"
    ]


def test_tools_star_or_empty_means_all(tmp_path: Path) -> None:
    write(tmp_path / ".claude/agents/a.md", "---\nname: a\ndescription: d\ntools: '*'\n---\n")
    write(tmp_path / ".claude/agents/b.md", "---\nname: b\ndescription: d\ntools:\n---\n")
    cast = Cast.load(tmp_path)
    assert cast.get("a").tools is None and cast.get("b").tools is None


def test_skill_l3_files_stay_inside_the_skill_folder(tmp_path: Path) -> None:
    folder = tmp_path / ".personae/skills/s"
    write(folder / "SKILL.md", "---\nname: s\ndescription: d\n---\nbody\n")
    write(tmp_path / "secret.txt", "x")
    (folder / "leak.txt").symlink_to(tmp_path / "secret.txt")
    write(folder / "ok.txt", "fine")
    assert Cast.load(tmp_path).skill("s").files() == [Path("ok.txt")]


def test_skill_name_must_match_folder_is_a_warning(tmp_path: Path) -> None:
    cast = clean_cast(
        tmp_path, ".personae/skills/folder/SKILL.md", "---\nname: other\ndescription: d\n---\n"
    )
    assert "other" in cast.skills
    assert "differs from its folder 'folder'" in str(cast.warnings[0])


def test_unknown_field_warning_suggests_closest(tmp_path: Path) -> None:
    path = write(
        tmp_path / ".personae/personas/a.md", "---\nname: a\ndescription: d\nmax_step: 3\n---\n"
    )
    cast = Cast.load(tmp_path)
    assert [str(w) for w in cast.warnings] == [
        f"{path}:4: unknown field 'max_step' kept as is (personae ignores it); "
        "did you mean 'max_steps'?"
    ]
    assert cast.get("a").extra == {"max_step": 3} and cast.get("a").max_steps is None
