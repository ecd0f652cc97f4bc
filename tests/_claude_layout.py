"""A small plugin marketplace in the layout of Anthropic's own (anthropics/claude-code's
``plugins/``), with the shapes that made ``personas check`` fail there.

Written by hand (no file copied): a ``plugin.json`` with only ``name`` (or a name and a
description), a plugin with no manifest that its marketplace entry stands in for, agent
descriptions holding ``: `` and ``<example>`` blocks that strict YAML refuses (one that
even Claude Code's lenient pass cannot read: it loads it named by its file), a Title Case
skill ``name`` (Claude Code names a skill by its folder), reference and example files
inside a skill folder (never agents), a slash command, and a spawn list naming an agent
the way Claude Code does (``plugin:agent``).
"""

from __future__ import annotations

import json
from pathlib import Path

MARKETPLACE = {
    "name": "layout-test",
    "owner": {"name": "Tests"},
    "plugins": [
        {"name": "review-kit", "source": "./plugins/review-kit", "category": "development"},
        {
            "name": "plugin-kit",
            "description": "Write plugins: agents, skills and commands.",
            "version": "0.1.0",
            "source": "./plugins/plugin-kit",
        },
        {"name": "sec-kit", "source": "./plugins/sec-kit"},
    ],
}

LENIENT = (
    "---\nname: comment-checker\n"
    "description: Use this agent to check code comments. This includes: (1) after writing "
    "docs, (2) before a pull request. Examples: <example>Context: the user wrote docs"
    '\\nuser: "check them"</example>\n'
    "model: inherit\ncolor: green\n---\n\nYou check that comments say what the code does.\n"
)

UNREADABLE = """---
name: simplifier
description: Use this agent when code was written and should be simpler. Examples:
<example>
Context: a feature was just added.
user: "Please add authentication to /api/users"
<function call omitted for brevity>
</example>
model: opus
---

You simplify code without changing what it does.
"""

MAKER = (
    "---\nname: agent-maker\n"
    'description: Use this agent when the user asks to "create an agent", "make me an agent '
    'that...". Trigger when user wants a new agent.\n\n'
    "<example>\nContext: the user wants a reviewer\n"
    'user: "Create an agent that reviews code"\n</example>\n\n'
    'model: sonnet\ncolor: magenta\ntools: ["Write", "Read"]\n---\n\nYou write agent files.\n'
)

FILES: dict[str, str] = {
    ".claude-plugin/marketplace.json": json.dumps(MARKETPLACE, indent=2),
    "plugins/review-kit/.claude-plugin/plugin.json": json.dumps(
        {"name": "review-kit", "description": "Review agents."}
    ),
    "plugins/review-kit/README.md": "# review-kit\n",
    "plugins/review-kit/agents/comment-checker.md": LENIENT,
    "plugins/review-kit/agents/code-simplifier.md": UNREADABLE,
    "plugins/review-kit/commands/review-pr.md": "---\ndescription: Review a PR\n---\nReview.\n",
    "plugins/plugin-kit/README.md": "# plugin-kit\n",
    "plugins/plugin-kit/agents/maker.md": MAKER,
    "plugins/plugin-kit/skills/agent-writing/SKILL.md": (
        "---\nname: Agent Writing\ndescription: This skill should be used when the user asks "
        'to "create an agent" or "write a subagent".\nversion: 0.1.0\n---\n\n# Agents\n'
    ),
    "plugins/plugin-kit/skills/agent-writing/references/prompt-design.md": (
        "---\nname: prompt-design\ndescription: How to write a system prompt.\n---\nText.\n"
    ),
    "plugins/plugin-kit/skills/agent-writing/examples/reviewer-agent.md": (
        "---\nname: reviewer\ndescription: An example agent file.\ntools: Read\n---\nReview.\n"
    ),
    "plugins/plugin-kit/skills/agent-writing/scripts/check.sh": "#!/bin/sh\nexit 0\n",
    "plugins/sec-kit/.claude-plugin/plugin.json": json.dumps({"name": "sec-kit"}),
    "plugins/sec-kit/agents/lead.md": (
        "---\nname: lead\ndescription: Leads a security review.\n"
        "tools: Agent(sec-kit:inventory), Read, Grep\n---\nSpawn the inventory agent.\n"
    ),
    "plugins/sec-kit/agents/inventory.md": (
        "---\nname: inventory\ndescription: Lists what a repository ships.\n"
        "tools: Read, Grep\n---\nList it.\n"
    ),
    "plugins/sec-kit/skills/triage/SKILL.md": (
        "---\nname: Triage Findings\ndescription: Sort findings by severity.\n---\nSort.\n"
    ),
}

CLAUDE_AGENTS = {
    "review-kit:comment-checker",
    "review-kit:code-simplifier",
    "plugin-kit:maker",
    "sec-kit:lead",
    "sec-kit:inventory",
}
"""The plugin agents Claude Code 2.1.331 lists for these plugins (measured: see
tests/test_persona_claude_binary.py)."""
CLAUDE_SKILLS = {"plugin-kit:agent-writing", "sec-kit:triage"}
"""The plugin skills it lists (named by folder)."""
UNPARSED = {"code-simplifier.md", "maker.md"}
"""Files whose frontmatter Claude Code cannot read (it logs a warning and names the agent
by its file)."""
LENIENT_READ = {"comment-checker.md"}
"""Files only Claude Code's lenient pass reads."""


def write_marketplace(root: Path) -> Path:
    """The marketplace written under ``root``; returns ``root``."""
    for rel, text in FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def plugin_folders(root: Path) -> list[Path]:
    """The plugin folders of the marketplace at ``root``, in its order."""
    entries: list[dict[str, str]] = MARKETPLACE["plugins"]  # type: ignore[assignment]
    return [root / entry["source"] for entry in entries]
