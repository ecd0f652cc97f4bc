"""Every bad input gives a clear `file:line: message` and the rest of the cast still loads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from _helpers import write
from personae.errors import UnknownNameError
from personae.persona import Cast

GOOD = "---\nname: good\ndescription: A fine persona.\ntools: [read_file]\n---\nHello.\n"


def load_with(tmp_path: Path, rel: str, text: str) -> tuple[Cast, Path]:
    """A project with one good persona plus ``text`` at ``rel``."""
    write(tmp_path / ".personae/personas/good.md", GOOD)
    bad = write(tmp_path / rel, text)
    return Cast.load(tmp_path), bad


def only_error(cast: Cast) -> str:
    assert len(cast.errors) == 1, [str(e) for e in cast.errors]
    assert "good" in cast.personas  # the rest of the cast still loads
    return str(cast.errors[0])


def field_error(
    tmp_path: Path, field: str, value: str, folder: str = ".personae/personas"
) -> tuple[str, Path]:
    """The only error (:func:`only_error`) of a persona file in ``folder`` whose front matter
    sets ``field`` (line 4, after name and description) to ``value``, and the file."""
    text = f"---\nname: x\ndescription: d\n{field}: {value}\n---\n"
    cast, bad = load_with(tmp_path, f"{folder}/bad.md", text)
    return only_error(cast), bad


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    cast, bad = load_with(
        tmp_path, ".personae/personas/bad.md", "---\nname: bad\ndescription: d\ntools: [a, b\n---\n"
    )
    msg = only_error(cast)
    assert msg.startswith(f"{bad}:")
    line = int(msg.split(":")[1])
    assert 4 <= line <= 5
    assert "malformed YAML" in msg


def test_frontmatter_not_a_mapping(tmp_path: Path) -> None:
    cast, bad = load_with(tmp_path, ".personae/personas/bad.md", "---\n- a\n- b\n---\n")
    assert only_error(cast) == f"{bad}:2: frontmatter must be a YAML mapping of keys to values"


def test_unclosed_frontmatter(tmp_path: Path) -> None:
    cast, bad = load_with(tmp_path, ".personae/personas/bad.md", "---\nname: x\n")
    assert only_error(cast).startswith(f"{bad}:1: frontmatter is not closed")


def test_personae_file_without_frontmatter_is_an_error(tmp_path: Path) -> None:
    cast, bad = load_with(tmp_path, ".personae/personas/bad.md", "just text\n")
    assert only_error(cast).startswith(f"{bad}:1: no YAML frontmatter")


@pytest.mark.parametrize("folder", [".personae/personas", ".claude/agents"])
def test_missing_name(tmp_path: Path, folder: str) -> None:
    cast, bad = load_with(tmp_path, f"{folder}/bad.md", "---\ndescription: d\n---\n")
    assert only_error(cast) == f"{bad}:1: missing required field 'name'"


@pytest.mark.parametrize("folder", [".personae/personas", ".claude/agents"])
def test_missing_description(tmp_path: Path, folder: str) -> None:
    cast, bad = load_with(tmp_path, f"{folder}/bad.md", "---\nname: x\n---\n")
    assert only_error(cast) == f"{bad}:1: missing required field 'description'"


def test_empty_description(tmp_path: Path) -> None:
    cast, bad = load_with(
        tmp_path, ".personae/personas/bad.md", "---\nname: x\ndescription: ''\n---\n"
    )
    assert only_error(cast) == f"{bad}:3: missing required field 'description'"


@pytest.mark.parametrize("name", ["Bad Name", "UPPER", "a/b", "x" * 65, "-lead"])
def test_bad_name_in_personae_file(tmp_path: Path, name: str) -> None:
    cast, bad = load_with(
        tmp_path, ".personae/personas/bad.md", f"---\nname: '{name}'\ndescription: d\n---\n"
    )
    assert only_error(cast).startswith(f"{bad}:2: bad name {name!r}")


@pytest.mark.parametrize("name", ["a/b", "<x>", "x" * 200])
def test_bad_name_in_claude_file(tmp_path: Path, name: str) -> None:
    cast, bad = load_with(
        tmp_path, ".claude/agents/bad.md", f"---\nname: '{name}'\ndescription: d\n---\n"
    )
    assert only_error(cast).startswith(f"{bad}:2: bad name")


def test_name_not_a_string(tmp_path: Path) -> None:
    cast, bad = load_with(
        tmp_path, ".personae/personas/bad.md", "---\nname: [a]\ndescription: d\n---\n"
    )
    assert only_error(cast) == f"{bad}:2: name must be a string, got list"


def test_duplicate_names_in_one_source_name_both_files(tmp_path: Path) -> None:
    first = write(tmp_path / ".personae/personas/a.md", "---\nname: twin\ndescription: one\n---\n")
    second = write(tmp_path / ".personae/personas/b.md", "---\nname: twin\ndescription: two\n---\n")
    write(tmp_path / ".personae/personas/good.md", GOOD)
    cast = Cast.load(tmp_path)
    msg = only_error(cast)
    assert msg.startswith(f"{second}:2: duplicate persona name 'twin'")
    assert str(first) in msg
    assert cast.get("twin").description == "one"


def test_duplicate_skill_names_in_one_source(tmp_path: Path) -> None:
    write(tmp_path / ".personae/skills/a/SKILL.md", "---\nname: a\ndescription: one\n---\n")
    second = write(
        tmp_path / ".personae/skills/b/SKILL.md", "---\nname: a\ndescription: two\n---\n"
    )
    write(tmp_path / ".personae/personas/good.md", GOOD)
    cast = Cast.load(tmp_path)
    msg = only_error(cast)
    assert msg.startswith(f"{second}: duplicate skill name 'a'")
    assert str(tmp_path / ".personae/skills/a/SKILL.md") in msg


def test_unknown_tool_in_personae_file_names_closest(tmp_path: Path) -> None:
    msg, bad = field_error(tmp_path, "tools", "[read_flie]")
    assert msg.startswith(f"{bad}:4: unknown tool 'read_flie'; did you mean 'read_file'?")
    assert "valid: agent, edit_file" in msg


def test_unconfigured_mcp_tool_in_personae_file_is_an_error(tmp_path: Path) -> None:
    msg, bad = field_error(tmp_path, "tools", "[mcp__gh__pr]")
    assert msg == f"{bad}:4: tool 'mcp__gh__pr': MCP server 'gh' is not configured"


def test_unknown_disallowed_tool_in_personae_file(tmp_path: Path) -> None:
    msg, bad = field_error(tmp_path, "disallowed_tools", "[wirte_file]")
    assert msg.startswith(f"{bad}:4: unknown tool 'wirte_file'; did you mean 'write_file'")


@pytest.mark.parametrize("folder", [".personae/personas", ".claude/agents"])
@pytest.mark.parametrize("value", ["42", "{a: 1}", "true", "[1, 2]"])
def test_tools_field_of_wrong_type(tmp_path: Path, folder: str, value: str) -> None:
    msg, bad = field_error(tmp_path, "tools", value, folder)
    assert msg.startswith(f"{bad}:4: tools ")
    assert "string" in msg


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("max_steps", "0", "max_steps must be a whole number >= 1, got 0"),
        ("maxTurns", "lots", "maxTurns must be a whole number >= 1, got 'lots'"),
        ("needs_temp_workspace", "maybe", "needs_temp_workspace must be true or false"),
        ("context", "forked", "unknown context mode 'forked'; did you mean 'fork'?"),
        (
            "constraints",
            "{mandatory_step: [x]}",
            "constraints.mandatory_step: unknown field 'mandatory_step'; did you mean "
            "'mandatory_steps'?",
        ),
        ("model", "[a]", "model must be a string"),
    ],
)
def test_bad_field_values(tmp_path: Path, field: str, value: str, expected: str) -> None:
    msg, bad = field_error(tmp_path, field, value)
    assert msg.startswith(f"{bad}:4: {expected}")


def test_unknown_skill_in_personae_file_is_an_error(tmp_path: Path) -> None:
    write(
        tmp_path / ".personae/skills/csv-tools/SKILL.md",
        "---\nname: csv-tools\ndescription: d\n---\n",
    )
    msg, bad = field_error(tmp_path, "skills", "[csv-tool]")
    assert msg == f"{bad}:4: unknown skill 'csv-tool'; did you mean 'csv-tools'?"


def test_unreadable_file_not_utf8(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/good.md", GOOD)
    bad = tmp_path / ".personae/personas/bad.md"
    bad.write_bytes(b"---\nname: \xff\xfe\n---\n")
    cast = Cast.load(tmp_path)
    assert only_error(cast) == f"{bad}: cannot read file: not valid UTF-8 (byte 10)"


def test_unreadable_file_dangling_symlink(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/good.md", GOOD)
    bad = tmp_path / ".personae/personas/gone.md"
    bad.symlink_to(tmp_path / ".personae/personas/missing.md")
    cast = Cast.load(tmp_path)
    assert only_error(cast) == f"{bad}: cannot read file: No such file or directory"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_permissions(tmp_path: Path) -> None:
    cast_dir = tmp_path / ".personae/personas"
    write(cast_dir / "good.md", GOOD)
    bad = write(cast_dir / "bad.md", GOOD.replace("good", "bad"))
    bad.chmod(0)
    try:
        assert only_error(Cast.load(tmp_path)) == f"{bad}: cannot read file: Permission denied"
    finally:
        bad.chmod(0o644)


def test_skill_description_with_angle_bracket(tmp_path: Path) -> None:
    cast, bad = load_with(
        tmp_path, ".personae/skills/s/SKILL.md", "---\nname: s\ndescription: use <b>this</b>\n---\n"
    )
    # Claude Code loads such skills, so personae does too: a warning, not an error.
    assert cast.errors == []
    assert [str(w) for w in cast.warnings] == [
        f"{bad}:3: description contains '<' or '>' (the Agent Skills rules forbid "
        "them); loaded as is, escaped wherever personae renders it"
    ]
    assert cast.skill("s").description == "use <b>this</b>"
    assert "&lt;b&gt;" in cast.available_skills_xml()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Bad_Skill", "bad skill name 'Bad_Skill'"),
        ("a--b", "bad skill name 'a--b'"),
        ("x" * 65, "bad skill name"),
    ],
)
def test_skill_bad_name(tmp_path: Path, name: str, message: str) -> None:
    cast, bad = load_with(
        tmp_path, ".personae/skills/s/SKILL.md", f"---\nname: {name}\ndescription: d\n---\n"
    )
    assert only_error(cast).startswith(f"{bad}:2: {message}")


def test_skill_description_too_long_or_missing(tmp_path: Path) -> None:
    cast, bad = load_with(
        tmp_path, ".personae/skills/s/SKILL.md", f"---\nname: s\ndescription: {'a' * 1025}\n---\n"
    )
    assert cast.errors == []
    assert [str(w) for w in cast.warnings] == [
        f"{bad}:3: description is 1025 chars, over the Agent Skills limit of 1024; "
        "loaded as is (some hosts may cut or refuse it)"
    ]
    assert cast.skill("s").description == "a" * 1025
    cast, bad = load_with(tmp_path, ".personae/skills/s/SKILL.md", "---\nname: s\n---\n")
    assert only_error(cast) == f"{bad}:1: missing required field 'description'"


def test_symlinked_file_escaping_project(tmp_path: Path) -> None:
    outside = write(tmp_path / "outside/secret.md", GOOD.replace("good", "secret"))
    project = tmp_path / "project"
    write(project / ".personae/personas/good.md", GOOD)
    link = project / ".personae/personas/secret.md"
    link.symlink_to(outside)
    cast = Cast.load(project)
    msg = only_error(cast)
    assert msg.startswith(f"{link}: symlink escapes the project root")
    assert str(outside) in msg
    assert "secret" not in cast.personas


def test_symlinked_folder_escaping_project(tmp_path: Path) -> None:
    write(tmp_path / "outside/deep/secret.md", GOOD.replace("good", "secret"))
    project = tmp_path / "project"
    write(project / ".claude/agents/good.md", GOOD)
    (project / ".claude/agents/linked").symlink_to(tmp_path / "outside/deep")
    cast = Cast.load(project)
    assert "symlink escapes the project root" in only_error(cast)
    assert "secret" not in cast.personas


def test_symlink_inside_project_is_fine(tmp_path: Path) -> None:
    write(tmp_path / "shared/helper.md", GOOD.replace("good", "helper"))
    write(tmp_path / ".personae/personas/good.md", GOOD)
    (tmp_path / ".personae/personas/helper.md").symlink_to(tmp_path / "shared/helper.md")
    cast = Cast.load(tmp_path)
    assert cast.problems == [] and "helper" in cast.personas


def test_symlinked_personae_dir_escaping(tmp_path: Path) -> None:
    write(tmp_path / "outside/personas/x.md", GOOD)
    project = tmp_path / "project"
    project.mkdir()
    (project / ".personae").symlink_to(tmp_path / "outside")
    cast = Cast.load(project)
    assert len(cast.errors) == 1 and "symlink escapes" in str(cast.errors[0])
    assert cast.personas == {}


def test_check_reports_all_problems_not_just_the_first(tmp_path: Path) -> None:
    folder = tmp_path / ".personae/personas"
    write(folder / "good.md", GOOD)
    write(folder / "a.md", "---\nname: a\n---\n")
    write(folder / "b.md", "---\nname: b\ndescription: d\ntools: [nope]\n---\n")
    write(folder / "c.md", "---\nname: c\ndescription: d\ntools: [\n---\n")
    write(tmp_path / ".personae/skills/s/SKILL.md", "---\nname: s\n---\n")
    cast = Cast.load(tmp_path)
    files = sorted(p.file.name for p in cast.errors)
    assert files == ["SKILL.md", "a.md", "b.md", "c.md"]
    assert list(cast.personas) == ["good"]


def test_get_unknown_persona_lists_closest(tmp_path: Path) -> None:
    write(tmp_path / ".personae/personas/good.md", GOOD)
    with pytest.raises(UnknownNameError) as info:
        Cast.load(tmp_path).get("goood")
    assert info.value.closest == "good"
    assert "did you mean 'good'" in str(info.value)


def test_dir_that_does_not_exist(tmp_path: Path) -> None:
    cast = Cast.load(tmp_path, [tmp_path / "nope"])
    assert [str(e) for e in cast.errors] == [f"{tmp_path / 'nope'}: no such directory"]


def test_mcp_json_through_escaping_symlinked_folder_is_not_read(tmp_path: Path) -> None:
    write(tmp_path / "outside/mcp.json", '{"mcpServers": {"evil": {"command": "x"}}}')
    project = tmp_path / "project"
    project.mkdir()
    (project / ".personae").symlink_to(tmp_path / "outside")
    cast = Cast.load(project)
    assert cast.mcp_servers == {}
    assert any("symlink escapes" in str(e) for e in cast.errors)


def test_escaping_symlink_in_a_dir_option(tmp_path: Path) -> None:
    write(tmp_path / "outside/x.md", GOOD.replace("good", "x"))
    write(tmp_path / "agents/good.md", GOOD)
    (tmp_path / "agents/x.md").symlink_to(tmp_path / "outside/x.md")
    cast = Cast.load(tmp_path / "empty", [tmp_path / "agents"])
    assert "symlink escapes the project root" in only_error(cast)


def test_bad_constraints_read_the_same_in_skills_and_personas(tmp_path: Path) -> None:
    cast, bad = load_with(
        tmp_path,
        ".personae/skills/s/SKILL.md",
        "---\nname: s\ndescription: d\nconstraints:\n  safety_rules: 3\n---\n",
    )
    assert only_error(cast) == (f"{bad}:4: constraints.safety_rules: Input should be a valid list")
