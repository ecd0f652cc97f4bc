"""Skills at run time: a persona's skills' L2 bodies for the worker and the validator.

Agent Skills load in three levels: L1 (name, description) is always in the
execution block and the validation context; L2 (the ``SKILL.md`` body) is loaded
here when the task calls for the skill; L3 files stay on disk for the tools.

* The worker gets the body of each of its persona's skills the turn's task or
  the subtask names (the skill's name, or two of its description's key words).
* The validator gets the bodies loaded for the worker plus any skill the
  worker's result cites by name (skills loaded for validation).

``!command`` lines in a body are expanded with the project's
``commands`` settings (off unless enabled, programs on ``commands.allow`` only).
Bodies share one token budget; a body that does not fit is cut with a notice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import quoteattr

from personae.context._textcut import cut_text
from personae.context.commands import CommandRun, expand_commands, has_commands
from personae.persona.model import Skill
from personae.project import CommandsConfig
from personae.tokens.base import TokenCounter

__all__ = ["DEFAULT_SKILL_BUDGET", "LoadedSkills", "cited_skills", "load_skills", "relevant_skills"]

DEFAULT_SKILL_BUDGET = 1500
"""Tokens all loaded skill bodies may take together (per call)."""

_WORD = re.compile(r"[a-z][a-z0-9]{3,}")
_COMMON = frozenset(
    [
        "this",
        "that",
        "with",
        "from",
        "when",
        "what",
        "your",
        "have",
        "will",
        "into",
        "only",
        "about",
        "them",
        "they",
        "then",
        "than",
        "their",
        "there",
        "these",
        "those",
        "also",
        "each",
        "which",
        "while",
        "where",
        "used",
        "uses",
        "using",
        "make",
        "makes",
        "file",
        "files",
        "work",
        "task",
        "tasks",
        "skill",
        "skills",
    ]
)


@dataclass(frozen=True, kw_only=True)
class LoadedSkills:
    """Skill bodies rendered for one prompt."""

    names: list[str] = field(default_factory=list)
    """The skills loaded, in order."""
    text: str = ""
    """``<skills>`` block with each body (empty when none)."""
    tokens: int = 0
    """Tokens of ``text``."""
    commands: list[CommandRun] = field(default_factory=list)
    """``!command`` occurrences and what happened to each."""
    cut: list[str] = field(default_factory=list)
    """Skills whose body was cut (or left out) to fit the budget."""


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _COMMON}


def relevant_skills(skills: Sequence[Skill], text: str) -> list[Skill]:
    """Skills ``text`` calls for: it names the skill, or shares two key words with its
    description."""
    lowered = text.lower()
    words = _words(text)
    chosen: list[Skill] = []
    for skill in skills:
        if _named_in(skill, lowered) or len(_words(skill.description) & words) >= 2:
            chosen.append(skill)
    return chosen


def cited_skills(skills: Sequence[Skill], text: str) -> list[Skill]:
    """Skills ``text`` cites by name (the worker says it applied them)."""
    lowered = text.lower()
    return [s for s in skills if _named_in(s, lowered)]


def _named_in(skill: Skill, lowered: str) -> bool:
    """``lowered`` names ``skill``: its name, or a plugin skill's own name without the
    ``plugin:`` part, with or without its hyphens."""
    own = skill.name.rsplit(":", 1)[-1]
    return skill.name in lowered or own in lowered or own.replace("-", " ") in lowered


def load_skills(
    skills: Iterable[Skill],
    *,
    counter: TokenCounter,
    root: Path,
    commands: CommandsConfig,
    budget: int = DEFAULT_SKILL_BUDGET,
    tag: str = "skills",
) -> LoadedSkills:
    """Read each skill's L2 body, expand ``!command`` lines, fit them all into ``budget``."""
    names: list[str] = []
    blocks: list[str] = []
    runs: list[CommandRun] = []
    cut: list[str] = []
    left = budget
    for skill in {s.name: s for s in skills}.values():
        try:
            body = skill.body().strip()
        except OSError as exc:
            body = f"[skill body unreadable: {exc.strerror or exc}]"
        if has_commands(body):
            body, ran = expand_commands(body, commands, root)
            runs.extend(ran)
        head = f"<skill name={quoteattr(skill.name)} path={quoteattr(str(skill.path))}>\n"
        wrapped = f"{head}{body}\n</skill>"
        tokens = counter.count(wrapped)
        if tokens > left:
            overhead = counter.count(f"{head}\n</skill>")
            notice = f"[skill {skill.name} cut to fit the budget; the full text is in {skill.path}]"
            shorter = cut_text(body, left - overhead, counter, notice) if left > overhead else None
            cut.append(skill.name)
            if shorter is None:
                continue
            wrapped = f"{head}{shorter.text}\n</skill>"
            tokens = counter.count(wrapped)
        names.append(skill.name)
        blocks.append(wrapped)
        left -= tokens
    if not blocks:
        return LoadedSkills(commands=runs, cut=cut)
    text = f"<{tag}>\n" + "\n".join(blocks) + f"\n</{tag}>"
    return LoadedSkills(names=names, text=text, tokens=counter.count(text), commands=runs, cut=cut)
