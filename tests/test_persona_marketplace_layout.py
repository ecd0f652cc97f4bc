"""A marketplace in the layout of Anthropic's own loads as Claude Code loads it.

The names personae gives (and Claude Code's ``plugin:name`` for each) are the ones the
Claude Code binary lists for the same plugins (tests/test_persona_claude_binary.py
measures them); ``personas check`` exits 0, warning only about the files whose
frontmatter Claude Code itself needs a fallback for.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _claude_layout import (
    CLAUDE_AGENTS,
    CLAUDE_SKILLS,
    LENIENT_READ,
    UNPARSED,
    write_marketplace,
)
from _helpers import personae_cli
from personae.persona import Cast


@pytest.fixture
def market(tmp_path: Path) -> Path:
    return write_marketplace(tmp_path / "market")


def _cast(tmp_path: Path, *dirs: Path) -> Cast:
    empty = tmp_path / "empty"
    empty.mkdir(exist_ok=True)
    return Cast.load(empty, list(dirs))


def test_a_marketplace_loads_every_agent_and_skill_claude_code_lists(
    tmp_path: Path, market: Path
) -> None:
    cast = _cast(tmp_path, market)
    assert cast.errors == []
    assert set(cast.personas) == CLAUDE_AGENTS  # the names Claude Code lists
    assert set(cast.skills) == CLAUDE_SKILLS  # plugin:folder
    assert set(cast.aliases) == {a.split(":")[-1] for a in CLAUDE_AGENTS}
    assert set(cast.skill_aliases) == {s.split(":")[-1] for s in CLAUDE_SKILLS}
    for name in CLAUDE_AGENTS:
        assert cast.get(name) is cast.get(name.split(":")[-1])
    for name in CLAUDE_SKILLS:
        assert cast.skill(name) is cast.skill(name.split(":")[-1])
    # Warnings only on the files Claude Code's own validator flags (`claude plugin validate`:
    # frontmatter it cannot parse); what it reads leniently without a word is a note.
    assert sorted(w.file.name for w in cast.warnings) == sorted(UNPARSED)
    assert sorted(n.file.name for n in cast.notes) == sorted(LENIENT_READ)
    unparsed = cast.get("plugin-kit:maker")
    assert unparsed.description == "maker" and unparsed.tools is None  # no field was read
    assert unparsed.system_prompt == "You write agent files.\n"


def test_personas_check_on_the_marketplace_exits_0(market: Path, tmp_path: Path) -> None:
    done = personae_cli("personas", "check", "--dir", str(market), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout
    report = json.loads(done.stdout)
    assert report["errors"] == 0 and report["personas"] == 5 and report["skills"] == 2
    shown = personae_cli("personas", "show", "sec-kit:lead", "--dir", str(market), cwd=tmp_path)
    assert shown.returncode == 0 and "name:              sec-kit:lead" in shown.stdout


def test_a_namespaced_spawn_entry_names_the_plugin_agent(tmp_path: Path, market: Path) -> None:
    cast = _cast(tmp_path, market)
    assert cast.get("lead").subagents == ["sec-kit:inventory"]
    assert cast.spawnable("sec-kit:lead") == ["sec-kit:inventory"]
    assert not [p for p in cast.problems if p.file.name == "lead.md"]


def test_files_in_a_skill_folder_are_never_personas(tmp_path: Path, market: Path) -> None:
    skills = market / "plugins/plugin-kit/skills"
    cast = _cast(tmp_path, skills)  # --dir on a folder of skills
    assert cast.personas == {} and set(cast.skills) == {"agent-writing"}
    assert cast.errors == [] and cast.warnings == []
    loaded = _cast(tmp_path, market)
    assert not [n for n in loaded.personas if n.rsplit(":", 1)[-1] == "reviewer"]


def test_a_folder_of_plugins_loads_each_plugin(tmp_path: Path, market: Path) -> None:
    # As Claude Code's --plugin-dir on a folder: each child with a manifest is a plugin.
    cast = _cast(tmp_path, market / "plugins")
    assert set(cast.personas) == {
        "review-kit:comment-checker", "review-kit:code-simplifier", "sec-kit:lead",
        "sec-kit:inventory",
    }  # fmt: skip
    assert cast.aliases["comment-checker"] == "review-kit:comment-checker" and cast.errors == []


def test_skills_of_claude_code_are_named_by_folder_personae_skills_by_rule(
    tmp_path: Path,
) -> None:
    for folder in (".claude/skills", ".personae/skills"):
        skill = tmp_path / folder / "pdf-tools/SKILL.md"
        skill.parent.mkdir(parents=True)
        skill.write_text("---\nname: PDF Tools\ndescription: d\n---\nB\n", encoding="utf-8")
    cast = Cast.load(tmp_path)
    assert set(cast.skills) == {"pdf-tools"}  # the Claude Code one, by its folder
    (error,) = cast.errors
    assert ".personae/skills/pdf-tools/SKILL.md" in str(error.file)
    assert "bad skill name 'PDF Tools'" in error.message


def test_spawn_warnings_are_grouped_per_parent(tmp_path: Path) -> None:
    agents = tmp_path / ".claude/agents"
    agents.mkdir(parents=True)
    (agents / "lead.md").write_text(
        "---\nname: lead\ndescription: d\ntools: Agent, Read\n---\nP\n", encoding="utf-8"
    )
    for n in range(12):
        (agents / f"w{n:02}.md").write_text(
            f"---\nname: w{n:02}\ndescription: d\ntools: Read, Write\n---\nP\n", encoding="utf-8"
        )
    cast = Cast.load(tmp_path)
    (warning,) = [w for w in cast.warnings if "may spawn" in w.message]
    assert warning.file.name == "lead.md"
    assert "12 of them have tools not in its own: w00 (write_file)" in warning.message
    assert warning.message.count("(write_file)") == 8 and "and 4 more" in warning.message
