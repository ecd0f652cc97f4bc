"""Render persona snippets: ``<available_agents>``, ``<available_skills>``, the
execution block (worker/manager) and the validation context (validator).

Output is deterministic (fixed order, no timestamps) so it caches well.
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from personae.persona.model import Constraints, Persona, Skill

__all__ = [
    "render_available_agents",
    "render_available_skills",
    "render_execution_block",
    "render_validation_context",
]

_GUIDANCE = (
    "- Worker is expected to use the skills above when they are relevant to the request.",
    "- Check that the worker's tool usage is consistent with the persona's tools and skills.",
    "- Check that every mandatory step and safety rule above was followed.",
)


def _xml_list(tag: str, item: str, entries: Sequence[Sequence[tuple[str, str]]]) -> str:
    """``<tag>`` holding one ``<item>`` per entry, each field escaped on its own line."""
    lines = [f"<{tag}>"]
    for fields in entries:
        lines.append(f"  <{item}>")
        lines += [f"    <{name}>{escape(value)}</{name}>" for name, value in fields]
        lines.append(f"  </{item}>")
    lines.append(f"</{tag}>")
    return "\n".join(lines)


def render_available_agents(personas: Sequence[Persona]) -> str:
    """``<available_agents>`` with each persona's name, description and context mode (what
    the child receives when spawned)."""
    entries = [
        [
            ("name", p.name),
            ("description", _one_line(p.description)),
            ("context", p.context_summary),
        ]
        for p in personas
    ]
    return _xml_list("available_agents", "agent", entries)


def render_available_skills(skills: Sequence[Skill]) -> str:
    """``<available_skills>`` with each skill's name, description and ``SKILL.md`` location."""
    entries = [
        [("name", s.name), ("description", _one_line(s.description)), ("location", str(s.path))]
        for s in skills
    ]
    return _xml_list("available_skills", "skill", entries)


def tools_summary(persona: Persona) -> str:
    """One line naming the persona's tools (``all tools of the parent`` when unrestricted)."""
    if persona.tools is None:
        text = "all tools of the parent"
    else:
        kept = [t for t in persona.tools if t not in persona.disallowed_tools]
        text = ", ".join(kept) if kept else "(none)"
    if persona.disallowed_tools:
        text += f"; never: {', '.join(persona.disallowed_tools)}"
    return text


def render_execution_block(persona: Persona, skills: Sequence[Skill]) -> str:
    """The execution persona block: prompt verbatim, skills' L1 metadata and tools."""
    parts = [
        f"<persona name={quoteattr(persona.name)}>\n{persona.system_prompt.rstrip()}\n</persona>"
    ]
    if skills:
        parts.append(render_available_skills(skills))
    tools = f"<persona_tools>{escape(tools_summary(persona))}</persona_tools>"
    if persona.max_steps is not None:
        tools += f"\n<step_budget>{persona.max_steps}</step_budget>"
    parts.append(tools)
    return "\n\n".join(parts)


def _constraint_lines(c: Constraints, indent: str) -> list[str]:
    out = []
    if c.mandatory_steps:
        out.append(f"{indent}Mandatory steps: {'; '.join(c.mandatory_steps)}")
    if c.required_tools:
        out.append(f"{indent}Required tools: {', '.join(c.required_tools)}")
    if c.safety_rules:
        out.append(f"{indent}Safety rules: {'; '.join(c.safety_rules)}")
    return out


def render_validation_context(persona: Persona, skills: Sequence[Skill]) -> str:
    """The validator's view of a persona: criteria only, never the execution prompt."""
    lines = [f"ACTIVE PERSONA: {persona.name} — {_one_line(persona.description)}", ""]
    lines.append(f"TOOLS AVAILABLE TO WORKER: {tools_summary(persona)}")
    if persona.mcp_servers:
        lines.append(f"MCP SERVERS: {', '.join(sorted(persona.mcp_servers))}")
    lines.append("")
    if skills:
        lines.append("SKILLS AVAILABLE TO WORKER:")
        for s in skills:
            lines.append(f"- {s.name}: {_one_line(s.description)}")
            if s.allowed_tools:
                lines.append(f"  Allowed tools: {', '.join(s.allowed_tools)}")
            constraint = _constraint_lines(s.constraints, "  ")
            lines += constraint
            if s.constraints.validation_guidance:
                lines.append(f"  Guidance: {_one_line(s.constraints.validation_guidance)}")
        lines.append("")
    persona_rules = _constraint_lines(persona.constraints, "- ")
    if persona_rules:
        lines.append("PERSONA CONSTRAINTS:")
        lines += persona_rules
        lines.append("")
    lines.append("VALIDATION GUIDANCE:")
    lines += _GUIDANCE
    if persona.constraints.validation_guidance:
        lines.append(f"- {_one_line(persona.constraints.validation_guidance)}")
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(text.split())
