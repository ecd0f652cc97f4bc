"""Two plugins that ship an agent of the same name both load, as in Claude Code.

Anthropic's own marketplace has one: ``feature-dev`` and ``pr-review-toolkit`` both ship
``code-reviewer``, and Claude Code lists ``feature-dev:code-reviewer`` and
``pr-review-toolkit:code-reviewer`` (tests/test_persona_claude_binary.py measures it with
the binary). Each is reached by its ``plugin:name``; the bare name names neither (one line
saying which to pick), unless a persona of no plugin owns it; no warning (Claude Code's
validator says nothing either); an export writes each file's own name back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from personae.errors import AmbiguousNameError
from personae.persona import Cast
from personae.persona.export import to_claude_code
from personae.persona.loader import load_persona_file
from personae.persona.preflight import run_cast

Cli = Callable[..., CompletedProcess[str]]


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def plugin(root: Path, name: str, agents: dict[str, str]) -> Path:
    folder = root / name
    write(folder / ".claude-plugin/plugin.json", json.dumps({"name": name}))
    for file, text in agents.items():
        write(folder / "agents" / file, text)
    return folder


REVIEWER = "---\nname: reviewer\ndescription: Reviews {what}.\ntools: Read, Grep\n---\nReview.\n"


@pytest.fixture
def plugins(tmp_path: Path) -> list[Path]:
    lead = (
        "---\nname: lead\ndescription: Leads.\n"
        "tools: Agent(audit:reviewer), Read, Grep\n---\nSpawn the audit reviewer.\n"
    )
    return [
        plugin(tmp_path / "p", "style", {"reviewer.md": REVIEWER.format(what="style")}),
        plugin(
            tmp_path / "p", "audit", {"reviewer.md": REVIEWER.format(what="risk"), "lead.md": lead}
        ),
    ]


def assert_reads_as_written(exported: Path, original: Path, kind: str, root: Path) -> None:
    """The exported file loads as the same persona as the original file (all but its path)."""
    reread = load_persona_file(exported, kind=kind, root=exported.parent, problems=[])
    first = load_persona_file(original, kind=kind, root=root, problems=[])
    assert reread is not None and first is not None
    assert reread.persona.model_dump(exclude={"source"}) == first.persona.model_dump(
        exclude={"source"}
    )


def load(tmp_path: Path, dirs: list[Path]) -> Cast:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    return Cast.load(empty, dirs)


def test_both_load_under_their_plugin_names(tmp_path: Path, plugins: list[Path]) -> None:
    cast = load(tmp_path, plugins)
    assert cast.problems == []  # no override warning: nothing was overridden
    assert cast.get("style:reviewer").description == "Reviews style."
    assert cast.get("audit:reviewer").description == "Reviews risk."
    assert set(cast.personas) == {"style:reviewer", "audit:reviewer", "audit:lead"}
    assert "reviewer" not in cast.personas and cast.find("reviewer") is None
    with pytest.raises(AmbiguousNameError, match="name one of audit:reviewer, style:reviewer"):
        cast.get("reviewer")
    # A spawn entry in Claude Code's form picks one; the unique bare name still resolves.
    assert cast.get("lead").subagents == ["audit:reviewer"]
    assert cast.get("lead").name == "audit:lead"
    assert cast.spawnable("audit:lead") == ["audit:reviewer"]
    assert cast.get("audit:lead") is cast.get("lead")


def test_a_persona_of_no_plugin_keeps_the_bare_name(tmp_path: Path, plugins: list[Path]) -> None:
    mine = tmp_path / "mine"
    write(mine / "reviewer.md", "---\nname: reviewer\ndescription: Mine.\n---\nReview.\n")
    cast = load(tmp_path, [*plugins, mine])
    assert cast.problems == []
    assert cast.get("reviewer").description == "Mine."
    assert cast.get("style:reviewer").description == "Reviews style."
    assert cast.get("audit:reviewer").description == "Reviews risk."
    one = load(tmp_path, [plugins[0], mine])  # one plugin agent and one of no plugin
    assert one.get("reviewer").description == "Mine."
    assert one.get("style:reviewer").description == "Reviews style."


def test_export_writes_each_files_own_name(tmp_path: Path, plugins: list[Path]) -> None:
    cast = load(tmp_path, plugins)
    for spaced, folder in (("style:reviewer", plugins[0]), ("audit:reviewer", plugins[1])):
        text = to_claude_code(cast.get(spaced))
        assert text.startswith("---\nname: reviewer\n")
        again = tmp_path / "again" / spaced.replace(":", "-") / "reviewer.md"
        write(again, text)
        assert_reads_as_written(again, folder / "agents/reviewer.md", "claude-code", folder)


def test_the_cli_names_the_choice(cli: Cli, tmp_path: Path, plugins: list[Path]) -> None:
    dirs = [a for p in plugins for a in ("--dir", str(p))]
    shown = cli("personas", "show", "audit:reviewer", *dirs, cwd=tmp_path)
    assert shown.returncode == 0 and "name:              audit:reviewer" in shown.stdout
    bare = cli("personas", "show", "reviewer", *dirs, cwd=tmp_path)
    assert bare.returncode == 2
    assert bare.stderr.strip() == (
        "personae: error: persona 'reviewer' is ambiguous: name one of audit:reviewer, "
        "style:reviewer"
    )
    checked = cli("personas", "check", *dirs, cwd=tmp_path)
    assert checked.returncode == 0 and "0 errors, 0 warnings" in checked.stdout


def skill(folder: Path, name: str, what: str) -> None:
    text = f"---\nname: {name}\ndescription: {what}\n---\nB\n"
    write(folder / "skills" / name / "SKILL.md", text)


def test_a_skill_two_plugins_ship_loads_twice(tmp_path: Path, plugins: list[Path]) -> None:
    """As Claude Code lists ``style:checklist`` and ``audit:checklist``: no override, no
    warning; each plugin's agents naming the bare skill get their own plugin's."""
    style, audit = plugins
    skill(style, "checklist", "Style checks.")
    skill(audit, "checklist", "Risk checks.")
    write(
        audit / "agents/lead.md",
        "---\nname: lead\ndescription: Leads.\ntools: Agent(reviewer), Read, Grep\n"
        "skills: [checklist]\n---\nLead.\n",
    )
    cast = load(tmp_path, plugins)
    assert cast.problems == []
    assert set(cast.skills) == {"style:checklist", "audit:checklist"}
    assert cast.skill("style:checklist").description == "Style checks."
    assert cast.skill("audit:checklist").description == "Risk checks."
    with pytest.raises(AmbiguousNameError, match="name one of audit:checklist, style:checklist"):
        cast.skill("checklist")
    lead = cast.get("audit:lead")  # bare names inside a plugin: that plugin's own first
    assert lead.skills == ["audit:checklist"] and lead.subagents == ["audit:reviewer"]
    mine = tmp_path / "mine"
    write(mine / "user.md", "---\nname: user\ndescription: U.\nskills: [checklist]\n---\nU.\n")
    (warning,) = load(tmp_path, [*plugins, mine]).warnings
    assert warning.message == (
        "skill 'checklist' is ambiguous: name one of audit:checklist, style:checklist"
    )


def test_a_plugin_agent_is_listed_and_exported_as_claude_code_names_it(
    cli: Cli, tmp_path: Path
) -> None:
    folder = plugin(tmp_path / "p", "books", {
        "clerk.md": "---\nname: clerk\ndescription: Files.\ntools: Agent(filer), Read\n"
                    "skills:\n- ledger\n---\nFile.\n",
        "filer.md": "---\nname: filer\ndescription: Files more.\ntools: Read\n---\nFile.\n",
    })  # fmt: skip
    skill(folder, "ledger", "Keeps the ledger.")
    cast = load(tmp_path, [folder])
    assert set(cast.personas) == {"books:clerk", "books:filer"}
    assert cast.get("clerk").subagents == ["books:filer"] and cast.get("clerk").skills == [
        "books:ledger"
    ]
    listed = cli("personas", "list", "--json", "--dir", str(folder), cwd=tmp_path)
    assert [p["name"] for p in json.loads(listed.stdout)] == ["books:clerk", "books:filer"]
    exported = cli("personas", "export", "clerk", "--format", "claude-code", "--dir",
                   str(folder), cwd=tmp_path)  # fmt: skip
    assert exported.returncode == 0, exported.stderr
    again = tmp_path / "again/clerk.md"
    write(again, exported.stdout)
    # every field as the file wrote it: name, spawn list and skills not namespaced
    assert_reads_as_written(again, folder / "agents/clerk.md", "plugin", folder)
    assert "Agent(filer)" in exported.stdout and "- ledger" in exported.stdout


@pytest.mark.parametrize("listed", ["./extra/", ["./extra/"], ["./agents"]])
def test_a_manifest_listing_an_agents_folder_is_refused_as_claude_code_does(
    tmp_path: Path, listed: object
) -> None:
    """Measured on wshobson/agents' pptx-deck-creation (``"agents": ["./agents"]``): Claude
    Code 2.1.331's validator says ``agents.0: Invalid string: must end with ".md"`` and its
    session lists none of that plugin's agents or skills; personae does the same, with one
    error naming the manifest and the field."""
    folder = plugin(tmp_path / "p", "deck", {"builder.md": REVIEWER.format(what="decks")})
    write(folder / "extra/more.md", "---\nname: more\ndescription: More.\n---\nMore.\n")
    write(folder / "skills/gates/SKILL.md", "---\nname: gates\ndescription: G.\n---\nB\n")
    write(folder / ".claude-plugin/plugin.json", json.dumps({"name": "deck", "agents": listed}))
    cast = load(tmp_path, [folder])
    assert cast.personas == {} and cast.skills == {}
    (error,) = cast.errors
    assert error.file == folder / ".claude-plugin/plugin.json"
    assert "is not a path ending in '.md'" in error.message
    files = {"name": "deck", "agents": ["./extra/more.md"]}  # what Claude Code accepts
    write(folder / ".claude-plugin/plugin.json", json.dumps(files))
    cast = load(tmp_path, [folder])
    assert cast.errors == [] and set(cast.personas) == {"deck:reviewer", "deck:more"}
    assert set(cast.skills) == {"deck:gates"}


def test_claude_code_tools_a_plugin_skill_lists_are_notes_as_for_agents(tmp_path: Path) -> None:
    """Measured on secondsky/claude-skills: Claude Code's validator is silent about a
    skill's ``allowed-tools: TodoWrite`` and an agent's ``allowed-tools`` (a skill's field;
    the agent gets every tool). The first is a note (as in an agent's ``tools``), an MCP
    tool of a server not configured stays a warning; the second keeps its warning, with
    the right hint; a personae skill keeps the Agent Skills rules."""
    folder = plugin(tmp_path / "p", "kit", {
        "tester.md": "---\nname: tester\ndescription: Tests.\nallowed-tools: Read\n---\nT.\n",
    })  # fmt: skip
    write(
        folder / "skills/vitest/SKILL.md",
        "---\nname: vitest\ndescription: V.\nallowed-tools: Read, TodoWrite, mcp__x__y\n---\nB\n",
    )
    cast = load(tmp_path, [folder])
    (note,) = cast.notes
    assert note.file.name == "SKILL.md" and note.message == (
        "tools personae does not provide, left out of the skill's allowed tools: TodoWrite"
    )
    assert sorted(w.message.split(";")[0] for w in cast.warnings) == [
        "tool 'mcp__x__y': MCP server 'x' is not configured",
        "unknown field 'allowed-tools' kept as is (personae ignores it)",
    ]
    assert any(w.message.endswith("did you mean 'tools'?") for w in cast.warnings)
    assert cast.skill("kit:vitest").allowed_tools == ["read_file"]
    mine = tmp_path / "proj"
    write(mine / ".personae/skills/vitest/SKILL.md",
          "---\nname: vitest\ndescription: V.\nallowed-tools: TodoWrite\n---\nB\n")  # fmt: skip
    (error,) = Cast.load(mine).problems
    assert "unknown tool 'TodoWrite'" in error.message and error.severity != "note"


def test_a_plugin_agents_bare_name_wins_over_a_bundled_persona(tmp_path: Path) -> None:
    folder = plugin(tmp_path / "p", "kit", {
        "researcher.md": "---\nname: researcher\ndescription: The kit's.\n---\nR.\n",
    })  # fmt: skip
    cast = run_cast(tmp_path / "empty", extra_dirs=[folder])
    assert cast.get("researcher").description == "The kit's."
    assert cast.get("kit:researcher") is cast.get("researcher")
    assert cast.get("repo-researcher").source_kind == "bundled"  # the other bundled one stays
