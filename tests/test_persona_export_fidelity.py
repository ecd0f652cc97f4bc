"""Export and re-import leave every frontmatter field of a Claude Code agent as written.

The shapes that changed in an export of 1,160 public agents: a folded ``>`` description
(its final newline), ``tools: '*'`` (dropped), ``agent`` (written as ``Task``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from personae.persona import Cast
from personae.persona.export import to_claude_code

AGENTS = {
    "folded": "description: >\n  A folded\n  description.\ntools: Read, Grep\n",
    "literal": "description: |\n  Line one.\n  Line two.\n",
    "star": "description: every tool\ntools: '*'\n",
    "lower": "description: spawns\ntools: agent, Read\n",
    "task-list": "description: spawns two\ntools: Task(folded, star), Read\n",
    "agent-list": "description: spawns one\ntools: Agent(lower), Bash\n",
    "unavailable": "description: odd tools\ntools: Read, NotebookRead, WebSearch\n",
    "model": "description: with a model\nmodel: sonnet\nmaxTurns: 7\ncolor: blue\n",
    # measured in public collections (lst97, wshobson): written back as they were
    "no-space": "description: commas\ntools: Read, WebFetch,WebSearch, Grep\n",
    "empty-list": "description: no tools\ntools: []\n",
    "yaml-list": "description: a list\ntools:\n- Read\n- Grep\n",
}


def _frontmatter(text: str) -> dict[str, object]:
    head = text.split("---\n", 2)[1]
    loaded = yaml.safe_load(head)
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_export_writes_each_field_as_the_file_wrote_it(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "a/.claude/agents"
    folder.mkdir(parents=True)
    for agent, fields in AGENTS.items():
        (folder / f"{agent}.md").write_text(
            f"---\nname: {agent}\n{fields}---\nPrompt of {agent}.\n", encoding="utf-8"
        )
    persona = Cast.load(tmp_path / "a").get(name)
    original = _frontmatter((folder / f"{name}.md").read_text(encoding="utf-8"))
    exported = to_claude_code(persona)
    written = _frontmatter(exported)
    assert {k: written.get(k) for k in original} == original

    again = tmp_path / "b/.claude/agents"
    again.mkdir(parents=True)
    (again / f"{name}.md").write_text(exported, encoding="utf-8")
    back = Cast.load(tmp_path / "b").get(name)
    ignore = {"source"}
    assert back.model_dump(exclude=ignore) == persona.model_dump(exclude=ignore)
    assert to_claude_code(back) == exported
