"""Research for one step: a run with the deep researcher's profile writes the step's
``RESEARCH.md``, which the planner's context then shows (its ``step_research`` section).

The step is the one the step sections read (``--step``, else STATE.md's current step,
else the first not done). Its text and the user's decisions for it reach the
researcher through the profile's instructions (the deep researcher's context is the
vision and its instructions only) and through the run's task. When the run is done
(every subtask validated) its answer is written, atomically, to that step folder's
``RESEARCH.md`` and to nothing else; a partial run writes nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Unpack

from personae.api.results import TeamResult
from personae.api.team import Team, TurnArgs
from personae.context.commands import defuse_commands
from personae.context.profiles import ProfileSet, load_profiles
from personae.context.sources import split_decisions, step_file
from personae.errors import ConfigError, UsageError
from personae.fsutil import write_atomic
from personae.layout import Layout
from personae.store.status import RunStatus

__all__ = [
    "RESEARCHER_PROFILE",
    "StepBrief",
    "StepResearch",
    "research_step",
    "step_research_brief",
]

RESEARCHER_PROFILE = "deep_researcher"
"""The context profile the researcher's worker runs with."""

RESEARCH_FILE = "RESEARCH.md"


@dataclass(frozen=True)
class StepBrief:
    """What the researcher is told about one step."""

    step: str
    """The step, as ``NN-goal/NN-step``."""
    folder: Path
    """The step's folder (where ``RESEARCH.md`` goes)."""
    task: str
    """The run's task."""
    instructions: str
    """The deep researcher's instructions with the step and its decisions."""


@dataclass(frozen=True)
class StepResearch:
    """What :func:`research_step` did."""

    step: str
    """The step researched (``NN-goal/NN-step``)."""
    path: Path
    """The step's ``RESEARCH.md``."""
    written: bool
    """The answer was written (the run was done); ``False``: nothing was written."""
    result: TeamResult[str]
    """The researcher's run."""


def step_research_brief(root: Path, step: str | None = None) -> StepBrief:
    """The step to research and what the researcher is told (a project without steps,
    or an unknown ``step``, is a :class:`ConfigError`)."""
    found = step_file(root, step)
    goals = Layout(root).docs / "goals"
    if found is None:
        raise ConfigError("no steps to research (no goals/NN-*/NN-*/STEP.md)", file=goals)
    folder = found.parent
    try:
        inside = folder.resolve().relative_to(goals.resolve())
    except ValueError:
        raise ConfigError("the step folder is outside the project's goals", file=folder) from None
    name = inside.as_posix()
    text = found.read_text(encoding="utf-8", errors="replace")
    body, decisions = split_decisions(text)
    quoted = f"## The step ({name}/STEP.md)\n\n{body.strip()}"
    if decisions:
        quoted += f"\n\n## The user's decisions for this step\n\n{decisions}"
    quoted = defuse_commands(quoted)  # file content in a profile's own text never runs
    task = (
        f"Research what step {name} needs before it is planned. Write the findings as "
        "Markdown notes for the planner: what to use and why, what to avoid, risks and "
        "open questions, with sources. Respect the user's decisions: research within "
        "the locked ones, compare options for the flexible ones, leave deferred items "
        f"out. The final answer is saved as {name}/{RESEARCH_FILE} as it is.\n\n{quoted}"
    )
    return StepBrief(step=name, folder=folder, task=task, instructions=quoted)


def _profiles(root: Path, brief: StepBrief) -> ProfileSet:
    """The project's profiles with the deep researcher's instructions extended by the
    step and its decisions."""
    base = load_profiles(root)
    prof = base.get(RESEARCHER_PROFILE)
    sections = []
    for spec in prof.sections:
        if spec.tag == "instructions" and spec.text:
            text = (
                f"{spec.text}\nThis run researches one step: write your findings as that "
                f"step's research notes (they are saved as {brief.step}/{RESEARCH_FILE}).\n\n"
                f"{brief.instructions}"
            )
            sections.append(spec.model_copy(update={"text": text}))
        else:
            sections.append(spec)
    changed = prof.model_copy(update={"sections": tuple(sections)})
    return replace(base, profiles={**base.profiles, RESEARCHER_PROFILE: changed})


def _write(folder: Path, answer: str) -> None:
    """``RESEARCH.md`` in ``folder``, atomically; a symlink there is replaced, never
    followed, and the folder itself is opened without following one."""
    flags = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(folder, flags)
    except OSError as exc:
        raise UsageError(f"cannot open the step folder ({exc.strerror})", file=folder) from None
    try:
        data = answer.strip().encode("utf-8") + b"\n"
        write_atomic(Path(RESEARCH_FILE), data, dir_fd=fd)
    finally:
        os.close(fd)


def research_step(team: Team, *, step: str | None = None, **turn: Unpack[TurnArgs]) -> StepResearch:
    """Run ``team`` (any model, persona and limits) with the deep researcher's profile
    on one step, and write its answer to the step's ``RESEARCH.md`` when the run is
    done. ``turn`` are :meth:`Team.run` keywords (``persona``, ``limits``, ``cancel``)."""
    root = Path(team.root)
    brief = step_research_brief(root, step)
    researcher = replace(team, profile=RESEARCHER_PROFILE, profiles=_profiles(root, brief))
    result = researcher.run(brief.task, **turn)
    done = result.status is RunStatus.DONE and bool(result.answer.strip())
    if done:
        _write(brief.folder, result.answer)
    return StepResearch(
        step=brief.step, path=brief.folder / RESEARCH_FILE, written=done, result=result
    )
