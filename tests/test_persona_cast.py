"""The Cast: override order, the rendered snippets, execution block and validation context."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _helpers import write
from personae.errors import UnknownNameError
from personae.persona import Cast
from personae.persona.scaffold import init_project

EXAMPLE_PROMPT_LINE = "Keep answers short: the figure, how you got it, and any caveat."


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Cast:
    root = tmp_path_factory.mktemp("example")
    init_project(root)
    return Cast.load(root)


def test_example_cast_loads_clean(example: Cast) -> None:
    assert example.problems == []
    assert sorted(example.personas) == ["analyst", "researcher", "writer"]
    assert sorted(example.skills) == ["csv-insights", "report-writing"]
    assert example.get("researcher").needs_temp_workspace is True


def test_override_order_project_then_dirs(tmp_path: Path) -> None:
    claude = write(
        tmp_path / ".claude/agents/x.md", "---\nname: x\ndescription: from claude\n---\n"
    )
    ours = write(
        tmp_path / ".personae/personas/x.md", "---\nname: x\ndescription: from personae\n---\n"
    )
    extra = write(tmp_path / "more/x.md", "---\nname: x\ndescription: from dir\n---\n")
    cast = Cast.load(tmp_path, [tmp_path / "more"])
    assert cast.get("x").description == "from dir"
    assert cast.errors == []
    assert [str(w) for w in cast.warnings] == [
        f"{ours}:2: persona 'x' overrides the one from {claude}",
        f"{extra}:2: persona 'x' overrides the one from {ours}",
    ]
    assert Cast.load(tmp_path).get("x").description == "from personae"


def test_skill_override_warns(tmp_path: Path) -> None:
    write(tmp_path / ".claude/skills/s/SKILL.md", "---\nname: s\ndescription: claude\n---\n")
    write(tmp_path / ".personae/skills/s/SKILL.md", "---\nname: s\ndescription: ours\n---\n")
    cast = Cast.load(tmp_path)
    assert cast.skill("s").description == "ours"
    assert "skill 's' overrides" in str(cast.warnings[0])


def test_available_agents_xml(example: Cast) -> None:
    xml = example.available_agents_xml()
    root = ET.fromstring(xml)
    assert root.tag == "available_agents"
    agents = [(a.findtext("name"), a.findtext("description")) for a in root]
    assert [name for name, _ in agents] == ["analyst", "researcher", "writer"]
    for name, desc in agents:
        assert desc == " ".join(example.get(str(name)).description.split())
    # Only name + description: the prompt stays private to the persona.
    assert EXAMPLE_PROMPT_LINE not in xml
    assert ET.fromstring(example.available_agents_xml(["writer"]))[0].findtext("name") == "writer"
    with pytest.raises(UnknownNameError):
        example.available_agents_xml(["nobody"])


def test_available_agents_say_what_each_child_receives(tmp_path: Path) -> None:
    write(tmp_path / ".claude/agents/a.md", "---\nname: a\ndescription: d\n---\n")
    write(
        tmp_path / ".personae/personas/b.md",
        "---\nname: b\ndescription: d\ncontext: isolated\n---\n",
    )
    write(
        tmp_path / ".personae/personas/c.md", "---\nname: c\ndescription: d\ncontext: fork\n---\n"
    )
    root = ET.fromstring(Cast.load(tmp_path).available_agents_xml())
    modes = {a.findtext("name"): a.findtext("context") for a in root}
    assert modes == {
        "a": "brief (default): the task, the conversation summary, the directive and the "
        "parent's name",
        "b": "isolated: only the task",
        "c": "fork: the task and the shared sections of the parent's context (never its "
        "persona prompt)",
    }


def test_available_agents_xml_escapes(tmp_path: Path) -> None:
    write(
        tmp_path / ".claude/agents/a.md", "---\nname: a\ndescription: 'Use for <b> & \"x\"'\n---\n"
    )
    root = ET.fromstring(Cast.load(tmp_path).available_agents_xml())
    assert root[0].findtext("description") == 'Use for <b> & "x"'


def test_available_skills_xml(example: Cast) -> None:
    root = ET.fromstring(example.available_skills_xml())
    assert root.tag == "available_skills"
    rows = {s.findtext("name"): s for s in root}
    assert sorted(rows) == ["csv-insights", "report-writing"]
    csv = rows["csv-insights"]
    assert csv.findtext("description") == example.skill("csv-insights").description
    location = Path(str(csv.findtext("location")))
    assert location.name == "SKILL.md" and location.is_file()
    only = ET.fromstring(example.available_skills_xml(["report-writing"]))
    assert [s.findtext("name") for s in only] == ["report-writing"]


def test_execution_block_has_prompt_verbatim_skills_and_tools(example: Cast) -> None:
    analyst = example.get("analyst")
    block = example.execution_block("analyst")
    assert analyst.system_prompt.rstrip() in block
    assert block.startswith('<persona name="analyst">\n')
    assert "<name>csv-insights</name>" in block  # its skill's L1
    assert "report-writing" not in block  # not its skill
    assert "# CSV insights" not in block  # L2 is on demand only
    assert "<persona_tools>read_file, grep, glob, list_dir; never: write_file, edit_file" in block
    assert "<step_budget>12</step_budget>" in block


def test_execution_block_unrestricted_tools(tmp_path: Path) -> None:
    write(tmp_path / ".claude/agents/a.md", "---\nname: a\ndescription: d\n---\nDo it.\n")
    block = Cast.load(tmp_path).execution_block("a")
    assert "<persona_tools>all tools of the parent</persona_tools>" in block
    assert "<available_skills>" not in block


def test_validation_context_content(example: Cast) -> None:
    ctx = example.validation_context("analyst")
    assert ctx.startswith("ACTIVE PERSONA: analyst — Answers questions")
    assert "SKILLS AVAILABLE TO WORKER:\n- csv-insights: Summarise and query CSV" in ctx
    assert "  Allowed tools: read_file, grep" in ctx
    assert "  Mandatory steps: State how many data rows were read" in ctx  # skill constraint
    assert "- Mandatory steps: Read the data file before stating any figure" in ctx
    assert "- Required tools: read_file" in ctx
    assert "- Safety rules: Never change the source data files" in ctx
    assert "VALIDATION GUIDANCE:" in ctx
    assert "Every number in the answer must be traceable" in ctx


@pytest.mark.parametrize("name", ["analyst", "researcher", "writer"])
def test_validation_context_never_contains_execution_prompt(example: Cast, name: str) -> None:
    persona = example.get(name)
    ctx = example.validation_context(name)
    for line in persona.system_prompt.splitlines():
        if len(line.strip()) > 20:
            assert line.strip() not in ctx
    for skill in example.persona_skills(name):
        assert skill.body().strip().splitlines()[0] not in ctx  # no L2 either


_prompts = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=300
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(prompt=_prompts)
def test_validation_context_never_contains_prompt_property(tmp_path: Path, prompt: str) -> None:
    marker = "PROMPT-ONLY-7f3a"
    body = f"{marker}\n{prompt}\n{marker}-end\n"
    folder = tmp_path / "p"
    shutil.rmtree(folder, ignore_errors=True)
    (folder / ".personae/personas").mkdir(parents=True)
    (folder / ".personae/personas/p.md").write_text(
        "---\nname: p\ndescription: A persona.\nconstraints:\n  safety_rules: [Be safe]\n---\n"
        + body,
        encoding="utf-8",
        newline="",
    )
    cast = Cast.load(folder)
    persona = cast.get("p")
    assert marker in persona.system_prompt
    assert marker not in cast.validation_context("p")
    assert persona.system_prompt.rstrip() in cast.execution_block("p")


def test_validation_context_lists_mcp_servers(tmp_path: Path) -> None:
    write(
        tmp_path / ".personae/personas/a.md",
        "---\nname: a\ndescription: d\nmcp_servers: {ledger: {command: l}}\n"
        "tools: [mcp__ledger__add]\n---\nSecret prompt.\n",
    )
    ctx = Cast.load(tmp_path).validation_context("a")
    assert "MCP SERVERS: ledger" in ctx
    assert "TOOLS AVAILABLE TO WORKER: mcp__ledger__add" in ctx
    assert "Secret prompt." not in ctx


@pytest.mark.parametrize("extra", [".", ".personae/personas", ".personae"])
def test_dir_inside_the_project_is_not_an_override_of_itself(tmp_path: Path, extra: str) -> None:
    """`check --dir .personae/personas` in a project reported every persona as overriding
    itself (and failed with --strict); a file's problems were reported twice."""
    init_project(tmp_path)
    bad = write(tmp_path / ".personae/personas/bad.md", "---\nname: bad\n---\n")
    cast = Cast.load(tmp_path, [tmp_path / extra])
    assert [str(p) for p in cast.problems] == [f"{bad}:1: missing required field 'description'"]
    assert sorted(cast.personas) == ["analyst", "researcher", "writer"]
    assert sorted(cast.skills) == ["csv-insights", "report-writing"]
    # A different file with the same name still overrides, with a warning.
    other = write(tmp_path / "more/writer.md", "---\nname: writer\ndescription: d\n---\n")
    again = Cast.load(tmp_path, [tmp_path / extra, tmp_path / "more"])
    mine = tmp_path / ".personae/personas/writer.md"
    assert [str(w) for w in again.warnings] == [
        f"{other}:2: persona 'writer' overrides the one from {mine}"
    ]


def test_who_may_spawn_is_read_as_the_runtime_grants_the_agent_tool(tmp_path: Path) -> None:
    agents = tmp_path / ".personae" / "personas"
    write(agents / "free.md", "---\nname: free\ndescription: Any tool.\n---\n")
    write(agents / "lead.md", "---\nname: lead\ndescription: L.\ntools: [Task, read_file]\n---\n")
    write(agents / "quiet.md", "---\nname: quiet\ndescription: Q.\ndisallowedTools: [Agent]\n---\n")
    write(agents / "reader.md", "---\nname: reader\ndescription: R.\ntools: [read_file]\n---\n")
    cast = Cast.load(tmp_path)
    assert cast.spawnable("free") == ["lead", "quiet", "reader"]  # no tools list: every tool
    assert cast.spawnable("lead") == ["free", "quiet", "reader"]
    assert cast.spawnable("quiet") == [] and cast.spawnable("reader") == []
