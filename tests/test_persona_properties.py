"""Invariants (hypothesis): loading never crashes, and export -> load is the identity."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personae.persona import Cast, Constraints, ContextMode, Persona
from personae.persona.export import to_claude_code
from personae.persona.loader import CLAUDE_KEYS, PERSONAE_KEYS

_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 50), st.floats(allow_nan=False), st.text(max_size=30)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=10,
)
_keys = st.sampled_from(sorted(CLAUDE_KEYS | PERSONAE_KEYS | {"color", "whatever"}))

SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _fresh(tmp_path: Path) -> Path:
    root = tmp_path / "p"
    shutil.rmtree(root, ignore_errors=True)
    return root


@SETTINGS
@given(
    meta=st.dictionaries(_keys, _values, max_size=8),
    kind=st.sampled_from([".personae/personas", ".claude/agents"]),
)
def test_any_frontmatter_loads_or_reports(tmp_path: Path, meta: dict[str, Any], kind: str) -> None:
    root = _fresh(tmp_path)
    path = root / kind / "x.md"
    path.parent.mkdir(parents=True)
    path.write_text("---\n" + yaml.safe_dump(meta) + "---\nbody\n", encoding="utf-8")
    cast = Cast.load(root)  # never raises
    if not cast.personas:
        assert cast.errors, "a file that did not load must say why"
        assert all(str(e).startswith(f"{path}:") for e in cast.errors)


@SETTINGS
@given(text=st.text(max_size=400))
def test_any_text_loads_or_reports(tmp_path: Path, text: str) -> None:
    root = _fresh(tmp_path)
    path = root / ".personae/personas/x.md"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    cast = Cast.load(root)
    assert cast.personas or cast.errors


_names = st.from_regex(r"[a-z0-9]{1,10}(-[a-z0-9]{1,8}){0,2}", fullmatch=True)
_line = (
    st.text(
        alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")),
        min_size=1,
        max_size=40,
    )
    .map(str.strip)
    .filter(bool)
)
_tools = st.lists(
    st.sampled_from(
        [
            "read_file",
            "write_file",
            "edit_file",
            "grep",
            "glob",
            "list_dir",
            "run_shell",
            "web_fetch",
            "agent",
        ]
    ),
    unique=True,
    max_size=5,
)


@st.composite
def personas(draw: st.DrawFn) -> Persona:
    return Persona(
        name=draw(_names),
        description=draw(_line),
        system_prompt=draw(st.one_of(st.just(""), _line.map(lambda s: s + "\n"))),
        tools=draw(st.one_of(st.none(), _tools)),
        disallowed_tools=draw(_tools),
        model=draw(st.one_of(st.none(), st.sampled_from(["sonnet", "inherit", "openai:gpt-4o"]))),
        max_steps=draw(st.one_of(st.none(), st.integers(1, 500))),
        needs_temp_workspace=draw(st.booleans()),
        skills=[],
        mcp_servers=draw(st.dictionaries(_names, st.just({"command": "x"}), max_size=2)),
        context=draw(st.sampled_from(list(ContextMode))),
        constraints=Constraints(
            mandatory_steps=draw(st.lists(_line, max_size=2)),
            safety_rules=draw(st.lists(_line, max_size=2)),
            validation_guidance=draw(st.one_of(st.just(""), _line)),
        ),
        version=draw(st.one_of(st.none(), st.just("1.2"))),
    )


@SETTINGS
@given(persona=personas())
def test_export_then_load_is_identity(tmp_path: Path, persona: Persona) -> None:
    root = _fresh(tmp_path)
    path = root / ".claude/agents" / f"{persona.name}.md"
    path.parent.mkdir(parents=True)
    path.write_text(to_claude_code(persona), encoding="utf-8")
    cast = Cast.load(root)
    assert cast.errors == []
    back = cast.get(persona.name)
    skip = {"source", "source_kind"}
    assert back.model_dump(exclude=skip) == persona.model_dump(exclude=skip)
