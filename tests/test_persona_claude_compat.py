"""Persona files load wherever Claude Code loads them (issue 17, persona files vs Claude Code).

The lenient frontmatter rules pinned here were read from Claude Code 2.1.331's
own bundle (see docs/personas.md, "How Claude Code reads frontmatter").
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _helpers import run_personae, write
from personae.persona import Cast
from personae.persona._frontmatter import parse_document
from personae.persona._tools import split_names
from personae.persona.export import to_claude_code

CORPUS = Path(__file__).parent / "data" / "claude_agents"
CORPUS_DIRS = [CORPUS / "claude-flow", CORPUS / "oh-my-claude-sisyphus"]
SKIP = {"source", "source_kind"}


def personae(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_personae(
        *args, cwd=cwd, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "NO_COLOR": "1"}
    )


def show_json(name: str, *dirs: Path, cwd: Path) -> dict[str, object]:
    args = [a for d in dirs for a in ("--dir", str(d))]
    result = personae("personas", "show", name, "--json", *args, cwd=cwd)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def check_json(*dirs: Path, cwd: Path) -> dict[str, object]:
    args = [a for d in dirs for a in ("--dir", str(d))]
    result = personae("personas", "check", "--json", *args, cwd=cwd)
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    data["exit"] = result.returncode
    return data


# Descriptions strict YAML refuses and Claude Code's fallback accepts: each is
# read as the text after "description: ", whole.
LENIENT = [
    "**Bold**: reviews pull requests",
    "Use this agent when: the user asks. Examples: <example>Context: x</example>",
    "Handles @mentions and `code`: carefully",
    "[draft] planner: breaks work down",
    "Deploys to prod | staging: with care",
    "C# expert: #1 choice (keeps the hash)",
    "100% coverage: always",
]


@pytest.mark.parametrize("desc", LENIENT)
@pytest.mark.process
def test_lenient_descriptions_load_whole_through_cli(tmp_path: Path, desc: str) -> None:
    write(tmp_path / "proj/.claude/agents/a.md", f"---\nname: a\ndescription: {desc}\n---\nP\n")
    with pytest.raises(yaml.YAMLError):  # strict YAML refuses every one of them
        yaml.safe_load(f"name: a\ndescription: {desc}\n")
    data = show_json("a", tmp_path / "proj", cwd=tmp_path)
    assert data["description"] == desc
    report = check_json(tmp_path / "proj", cwd=tmp_path)
    assert report["errors"] == 0 and report["exit"] == 0
    assert "read leniently" in json.dumps(report["problems"])


def test_lenient_reading_turns_leading_tabs_into_spaces(tmp_path: Path) -> None:
    text = "---\nname: t\ndescription: **x**: y\nmcpServers:\n\t- ledger\n---\n"
    write(tmp_path / ".claude/agents/t.md", text)
    cast = Cast.load(tmp_path)
    assert cast.errors == []
    assert cast.get("t").mcp_servers == {"ledger": {}}


def test_lenient_reading_is_not_used_for_personae_files(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/a.md", "---\nname: a\ndescription: **B**: x\n---\n")
    cast = Cast.load(tmp_path)
    assert [e.line for e in cast.errors] == [3]
    assert "malformed YAML" in cast.errors[0].message


def test_recursive_alias_is_never_read_leniently(tmp_path: Path) -> None:
    write(tmp_path / ".claude/agents/r.md", "---\nname: r\ndescription: d\na: &a [1, *a]\n---\n")
    cast = Cast.load(tmp_path)
    assert "recursive YAML alias" in cast.errors[0].message
    assert cast.personas == {}


@pytest.mark.process
def test_unquoted_hash_does_not_silently_cut_description(tmp_path: Path) -> None:
    write(
        tmp_path / "p/.claude/agents/c.md",
        "---\nname: c\ndescription: Reviews C# code #fast and safely\nmodel: sonnet # cheap\n---\n",
    )
    data = show_json("c", tmp_path / "p", cwd=tmp_path)
    assert data["description"] == "Reviews C# code #fast and safely"
    assert data["model"] == "sonnet"  # a comment after other keys stays a comment
    report = check_json(tmp_path / "p", cwd=tmp_path)
    messages = [p["message"] for p in report["problems"]]  # type: ignore[index, union-attr]
    assert messages == [
        "description has an unquoted ' #': YAML and Claude Code cut it to 'Reviews C# code'; "
        "personae keeps the full text (quote the value so both read the same)"
    ]
    # The export quotes it, so Claude Code then reads the full text too.
    exported = to_claude_code(Cast.load(tmp_path / "p").get("c"))
    meta = yaml.safe_load(exported.split("---\n")[1])
    assert meta["description"] == "Reviews C# code #fast and safely"


@pytest.mark.process
def test_skill_over_1024_chars_loads_with_warning_through_cli(tmp_path: Path) -> None:
    # Anthropic's own claude-api skill has a description of this kind of length.
    desc = "Build apps with the Claude API or Anthropic SDK. " * 25
    write(
        tmp_path / "p/.claude/skills/claude-api/SKILL.md",
        f"---\nname: claude-api\ndescription: {desc.strip()}\n---\nBody\n",
    )
    report = check_json(tmp_path / "p", cwd=tmp_path)
    assert report["exit"] == 0 and report["errors"] == 0 and report["skills"] == 1
    assert "over the Agent Skills limit of 1024" in json.dumps(report["problems"])
    strict = personae("personas", "check", "--strict", "--dir", str(tmp_path / "p"), cwd=tmp_path)
    assert strict.returncode == 1
    assert Cast.load(tmp_path / "p").skill("claude-api").description == desc.strip()


def test_skill_frontmatter_read_leniently(tmp_path: Path) -> None:
    write(tmp_path / ".claude/skills/s/SKILL.md", "---\nname: s\ndescription: **S**: does s\n---\n")
    cast = Cast.load(tmp_path)
    assert cast.errors == []
    assert cast.skill("s").description == "**S**: does s"


# --- export / load round trip ---------------------------------------------------------


def _tools_entry(text: str, key: str) -> list[str] | None:
    meta = parse_document(text, lenient=True).meta  # what Claude Code reads
    if meta.get(key) is None:
        return None
    return split_names(meta[key])


def test_corpus_round_trip_is_exact_field_by_field(tmp_path: Path) -> None:
    cast = Cast.load(tmp_path / "none", CORPUS_DIRS)
    assert cast.errors == []
    changed_before = 0
    for name, persona in sorted(cast.personas.items()):
        assert persona.source is not None
        original_text = persona.source.read_text(encoding="utf-8")
        exported = to_claude_code(persona)
        folder = tmp_path / name / ".claude/agents"
        write(folder / f"{name}.md", exported)
        again = Cast.load(tmp_path / name)
        assert again.errors == [], (name, [str(e) for e in again.errors])
        back = again.get(name)
        before, after = persona.model_dump(exclude=SKIP), back.model_dump(exclude=SKIP)
        for field in before:
            assert after[field] == before[field], (name, field)
        # What Claude Code reads: the tools entry comes back exactly as written.
        written = _tools_entry(original_text, "tools")
        if written is not None and written != ["*"]:
            assert _tools_entry(exported, "tools") == written, name
        if persona.claude_tools is not None:
            changed_before += 1  # the old export rewrote or reordered these lists
    assert changed_before >= 10


CLAUDE_TOOLS = [
    "Read",
    "Write",
    "Edit",
    "MultiEdit",
    "Bash",
    "Bash(git:*)",
    "Grep",
    "Glob",
    "LS",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
    "Task",
    "Agent",
    "NotebookEdit",
    "mcp__ledger__add",
    "mcp__gone__x",
    "read_file",
    "agent",
]
_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")),
    min_size=1,
    max_size=60,
).filter(lambda s: s.strip() and "---" not in s)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    desc=_text,
    tools=st.one_of(st.none(), st.lists(st.sampled_from(CLAUDE_TOOLS), max_size=8)),
    denied=st.one_of(st.none(), st.lists(st.sampled_from(CLAUDE_TOOLS), max_size=4)),
    as_string=st.booleans(),
    quote=st.booleans(),
    servers=st.sampled_from([None, "[ledger]", "{ledger: {command: x}}"]),
)
def test_any_claude_file_round_trips_exactly(
    tmp_path_factory: pytest.TempPathFactory,
    *,
    desc: str,
    tools: list[str] | None,
    denied: list[str] | None,
    as_string: bool,
    quote: bool,
    servers: str | None,
) -> None:
    root = tmp_path_factory.mktemp("rt")
    lines = ["---", "name: rt", f"description: {json.dumps(desc) if quote else desc}"]
    for key, value in (("tools", tools), ("disallowedTools", denied)):
        if value is not None:
            lines.append(f"{key}: {', '.join(value) if as_string else json.dumps(value)}")
    if servers:
        lines.append(f"mcpServers: {servers}")
    text = "\n".join([*lines, "---", "Prompt body.", ""])
    write(root / "a/.claude/agents/rt.md", text)
    first = Cast.load(root / "a")
    if "rt" not in first.personas:  # strict YAML and Claude Code's fallback both refused it
        assert first.errors
        return
    persona = first.get("rt")
    exported = to_claude_code(persona)
    write(root / "b/.claude/agents/rt.md", exported)
    second = Cast.load(root / "b")
    assert second.errors == []
    assert second.get("rt").model_dump(exclude=SKIP) == persona.model_dump(exclude=SKIP)
    if tools:  # every entry as the file wrote it (`agent` stays `agent`, not `Task`)
        assert _tools_entry(exported, "tools") == tools
    assert to_claude_code(second.get("rt")) == exported
    shutil.rmtree(root)


# --- where files are found ------------------------------------------------------------

AGENT = "---\nname: {n}\ndescription: Agent {n}.\n---\nPrompt {n}.\n"
SKILL = "---\nname: {n}\ndescription: Skill {n}.\n---\nBody.\n"
COMMAND = "---\ndescription: A slash command.\nallowed-tools: Bash\n---\nRun it.\n"


@pytest.mark.process
def test_dir_with_claude_folder_finds_agents_and_skills(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write(repo / ".claude/agents/rev.md", AGENT.format(n="rev"))
    write(repo / ".claude/skills/lint/SKILL.md", SKILL.format(n="lint"))
    write(repo / ".claude/commands/deploy.md", COMMAND)
    for given_dir in (repo, repo / ".claude"):
        report = check_json(given_dir, cwd=tmp_path)
        assert (report["personas"], report["skills"], report["errors"]) == (1, 1, 0), given_dir
        assert show_json("rev", given_dir, cwd=tmp_path)["system_prompt"] == "Prompt rev.\n"


@pytest.mark.process
def test_dir_that_finds_nothing_says_so_and_names_nested_projects(tmp_path: Path) -> None:
    write(tmp_path / "mono/svc/.claude/agents/rev.md", AGENT.format(n="rev"))
    report = check_json(tmp_path / "mono", cwd=tmp_path)
    assert report["personas"] == 0
    problems = report["problems"]
    assert isinstance(problems, list) and len(problems) == 1
    assert problems[0]["severity"] == "warning"
    assert "no persona or skill files found here" in problems[0]["message"]
    assert str(tmp_path / "mono/svc") in problems[0]["message"]


def test_plain_folder_skips_slash_commands(tmp_path: Path) -> None:
    write(tmp_path / "stuff/agents/rev.md", AGENT.format(n="rev"))
    write(tmp_path / "stuff/commands/deploy.md", COMMAND)
    cast = Cast.load(tmp_path / "none", [tmp_path / "stuff"])
    assert list(cast.personas) == ["rev"]
    assert [(p.file.name, p.severity) for p in cast.problems] == [("deploy.md", "warning")]


def make_marketplace(root: Path) -> None:
    write(
        root / ".claude-plugin/marketplace.json",
        json.dumps(
            {
                "name": "market",
                "owner": {"name": "someone"},
                "metadata": {"pluginRoot": "./plugins"},
                "plugins": [
                    {"name": "review", "source": "./plugins/review", "version": "1.0.0"},
                    {
                        "name": "docs",
                        "source": "docs",
                        "description": "Docs tools",
                        "version": "2.0.0",
                        "strict": False,
                    },
                    {"name": "far", "source": {"source": "github", "repo": "o/far"}},
                ],
            }
        ),
    )
    review = root / "plugins/review"
    write(
        review / ".claude-plugin/plugin.json",
        json.dumps(
            {"name": "review", "description": "Review tools", "agents": "./extra/second.md"}
        ),
    )
    write(review / "agents/reviewer.md", AGENT.format(n="reviewer"))
    write(review / "extra/second.md", AGENT.format(n="second"))
    write(review / "commands/review-pr.md", COMMAND)
    write(review / "skills/checklist/SKILL.md", SKILL.format(n="checklist"))
    docs = root / "plugins/docs"  # no plugin.json: the marketplace entry stands in
    write(docs / "agents/writer.md", AGENT.format(n="writer"))
    write(docs / "commands/publish.md", COMMAND)
    write(docs / "skills/style/SKILL.md", SKILL.format(n="style"))


@pytest.mark.process
def test_marketplace_root_loads_agents_and_skills_not_commands(tmp_path: Path) -> None:
    make_marketplace(tmp_path / "market")
    report = check_json(tmp_path / "market", cwd=tmp_path)
    assert report["exit"] == 0 and report["errors"] == 0
    cast = Cast.load(tmp_path / "none", [tmp_path / "market"])
    assert sorted(cast.personas) == ["docs:writer", "review:reviewer", "review:second"]
    assert sorted(cast.skills) == ["docs:style", "review:checklist"]
    assert cast.get("writer") is cast.get("docs:writer")  # unique bare names still find them
    assert cast.skill("style") is cast.skill("docs:style")
    assert {p.source_kind for p in cast.personas.values()} == {"plugin"}
    warnings = [p.message for p in cast.warnings]
    assert warnings == [
        "marketplace.json: plugin 'far' has a remote source "
        "{'source': 'github', 'repo': 'o/far'}; not fetched, not loaded"
    ]
    listed = personae("personas", "list", "--dir", str(tmp_path / "market"), cwd=tmp_path)
    assert listed.returncode == 0
    assert "review-pr" not in listed.stdout and "publish" not in listed.stdout


def test_marketplace_source_escaping_root_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "outside/agents/evil.md", AGENT.format(n="evil"))
    write(
        tmp_path / "m/.claude-plugin/marketplace.json",
        json.dumps({"name": "m", "plugins": [{"name": "evil", "source": "../outside"}]}),
    )
    cast = Cast.load(tmp_path / "none", [tmp_path / "m"])
    assert cast.personas == {}
    assert any("escapes" in e.message for e in cast.errors)


@pytest.mark.process
def test_cli_export_keeps_agent_and_multiedit(tmp_path: Path) -> None:
    write(
        tmp_path / "p/.claude/agents/lead.md",
        "---\nname: lead\ndescription: Leads.\ntools: Agent, Read, MultiEdit, Edit, WebSearch\n"
        "disallowedTools: [Task]\n---\nLead.\n",
    )
    result = personae(
        "personas",
        "export",
        "lead",
        "--format",
        "claude-code",
        "--dir",
        str(tmp_path / "p"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert _tools_entry(result.stdout, "tools") == [
        "Agent",
        "Read",
        "MultiEdit",
        "Edit",
        "WebSearch",
    ]
    assert _tools_entry(result.stdout, "disallowedTools") == ["Task"]
    persona = Cast.load(tmp_path / "p").get("lead")
    assert persona.tools == ["agent", "read_file", "edit_file"]


def test_crlf_file_needing_the_fallback_loads_with_a_warning(tmp_path: Path) -> None:
    # Claude Code's fallback regex does not match a line ending in CR, so it drops this file.
    path = tmp_path / ".claude/agents/w.md"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"---\r\nname: w\r\ndescription: **W**: windows file\r\n---\r\nBody\r\n")
    cast = Cast.load(tmp_path)
    assert cast.errors == []
    assert cast.get("w").description == "**W**: windows file"
    assert any("Claude Code does not load this file" in w.message for w in cast.warnings)
    # The same file with LF endings draws no such warning.
    path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n"))
    assert not any("does not load" in w.message for w in Cast.load(tmp_path).warnings)
