"""Reading the directive and the ``.personae/project/`` files (vision, gameplan, state,
step, codebase and research notes).

Files are read again whenever they changed (path, identity, mtime and size:
see ``_read`` and ``_probe``, which records every path consulted so a snapshot
can reuse an unchanged project's reads); missing files are skipped
silently (a section without content is never rendered, so there is never an
empty tag).
"""

from __future__ import annotations

import os
import re
import stat
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from personae.context._lru import remember
from personae.context._probe import probe, record
from personae.context.gitlog import git_log
from personae.errors import ConfigError
from personae.fsutil import read_regular
from personae.layout import Layout

__all__ = [
    "DIRECTIVE_FILES",
    "TASK_TYPES",
    "ProjectFiles",
    "detect_task_type",
    "git_log",
    "read_directive",
    "read_named",
    "read_project",
    "split_decisions",
    "step_file",
]

DIRECTIVE_FILES = (Layout(Path()).directive.as_posix(), "AGENTS.md", "CLAUDE.md")
"""Where the directive is looked for, first existing non-empty file wins."""

# Task-type detection: keywords -> codebase files and research files.
TASK_TYPES: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "testing": (
        (
            "test",
            "tests",
            "spec",
            "coverage",
            "assert",
            "expect",
            "mock",
            "fixture",
            "e2e",
            "unit test",
            "integration test",
        ),
        ("TESTING.md", "CONVENTIONS.md"),
        ("PITFALLS.md",),
    ),
    "api": (
        (
            "endpoint",
            "route",
            "api",
            "request",
            "response",
            "database",
            "query",
            "schema",
            "model",
            "migration",
            "rest",
            "graphql",
            "server",
            "middleware",
        ),
        ("ARCHITECTURE.md", "CONVENTIONS.md"),
        ("STACK.md", "ARCHITECTURE.md"),
    ),
    "ui": (
        (
            "page",
            "component",
            "form",
            "layout",
            "button",
            "modal",
            "style",
            "css",
            "tailwind",
            "responsive",
            "visual",
            "screen",
            "view",
            "template",
            "render",
        ),
        ("CONVENTIONS.md", "STRUCTURE.md"),
        ("FEATURES.md",),
    ),
    "general": ((), ("CONVENTIONS.md",), ()),
}
"""task type -> (keywords, codebase files, research files)."""


_MAX_BYTES = 8_000_000


_READS: OrderedDict[str, tuple[tuple[int, int, int, int], str | None]] = OrderedDict()
_READS_MAX = 512
"""Texts read earlier in this process, by path, with the file's identity when read."""


def _read(path: Path) -> str | None:
    """File text, or None when missing, unreadable as a file, or blank.

    A regular file whose device, inode, modification time (ns) and size are
    unchanged since it was last read is not read again.
    """
    where = str(path)
    try:
        info = os.stat(where)
    except FileNotFoundError:
        record(where, None)
        return None
    except OSError:
        info = None
    record(where, _ident(info))
    ident = None
    if info is not None and stat.S_ISREG(info.st_mode):
        ident = (info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)
        got = _READS.get(where)
        if got is not None and got[0] == ident:
            return got[1]
    text = _read_file(path)
    if ident is not None:
        remember(_READS, where, (ident, text), _READS_MAX)
    return text


def _ident(info: os.stat_result | None) -> tuple[int, int, int, int, int] | None:
    if info is None:
        return None
    return (info.st_mode, info.st_dev, info.st_ino, info.st_mtime_ns, info.st_size)


def _is_dir(path: Path) -> bool:
    """True for a folder (symlinks followed); the check is recorded (see ``_probe``)."""
    got = probe(path)
    return got is not None and stat.S_ISDIR(got[0])


def _is_file(path: Path) -> bool:
    got = probe(path)
    return got is not None and stat.S_ISREG(got[0])


def _is_link(path: Path) -> bool:
    got = probe(path, follow=False)
    return got is not None and stat.S_ISLNK(got[0])


def _read_file(path: Path) -> str | None:
    try:
        text = read_regular(path, max_bytes=_MAX_BYTES).decode("utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        return None
    except UnicodeDecodeError as exc:
        raise ConfigError("not UTF-8 text", file=path) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=path) from exc
    text = text.strip("\n")
    return text if text.strip() else None


def read_directive(root: Path) -> tuple[str, Path] | None:
    """The directive and its file: ``.personae/directive.md``, else AGENTS.md, else CLAUDE.md."""
    for name in DIRECTIVE_FILES:
        path = root / name
        text = _read(path)
        if text is not None:
            return text, path
    return None


def detect_task_type(task: str | None) -> str:
    """``testing``, ``api``, ``ui`` or ``general`` from keywords in the task text."""
    if not task:
        return "general"
    best, best_hits = "general", 0
    for kind, pattern in _KEYWORDS.items():
        hits = len(pattern.findall(task))
        if hits > best_hits:
            best, best_hits = kind, hits
    return best


_KEYWORDS = {
    kind: re.compile(
        r"\b(?:" + "|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)) + r")s?\b",
        re.IGNORECASE,
    )
    for kind, (words, _, _) in TASK_TYPES.items()
    if words
}


def split_decisions(step: str) -> tuple[str, str | None]:
    """``(step without its ## Decisions section, the decisions block)``."""
    match = re.search(r"(?im)^##\s+decisions\s*$", step)
    if not match:
        return step, None
    rest = step[match.end() :]
    nxt = re.search(r"(?m)^##\s+\S", rest)
    body = (rest[: nxt.start()] if nxt else rest).strip("\n")
    remaining = (step[: match.start()] + (rest[nxt.start() :] if nxt else "")).strip("\n")
    if not body.strip():
        return remaining, None
    block = (
        "These are the user's decisions for this step. Follow them exactly:\n\n"
        f"{body}\n\n"
        "RULES:\n"
        "- Locked items are non-negotiable -- follow them exactly as stated.\n"
        "- Flexible items are your choice -- use your best judgment.\n"
        "- Deferred items are out of scope -- do NOT implement them, even partially."
    )
    return remaining, block


@dataclass(frozen=True)
class ProjectFiles:
    """The ``.personae/project/`` documents found for one turn (source key -> text)."""

    texts: dict[str, str] = field(default_factory=dict)
    """Source key (vision, gameplan, state, step, decisions, ...) -> content."""
    files: dict[str, str] = field(default_factory=dict)
    """Source key -> where it was read from."""
    step_without_decisions: str | None = None
    """The STEP.md text with its Decisions section taken out."""
    task_type: str = "general"
    """Detected task type."""


def _steps(base: Path) -> list[Path]:
    goals = base / "goals"
    if not _is_dir(goals):
        return []
    for goal in goals.glob("[0-9]*"):  # the listings the glob below reads, recorded
        if _is_dir(goal):
            for step in goal.glob("[0-9]*"):
                probe(step)
    return sorted(base.glob("goals/[0-9]*/[0-9]*/STEP.md"))


def _current_step(base: Path, step: str | None, state: str | None) -> Path | None:
    steps = _steps(base)
    if step:
        for p in steps:
            rel = p.parent.relative_to(base / "goals").as_posix()
            if step in (rel, p.parent.name) or rel.endswith(step.strip("/")):
                return p
        raise ConfigError(f"no step {step!r} under {base / 'goals'}", field="step")
    if state:
        for p in steps:
            if re.search(rf"(?i)current step\W+.*{re.escape(p.parent.name)}", state):
                return p
    for p in steps:
        text = _read(p) or ""
        if not re.search(r"(?im)^\**status\**:\s*(done|complete|completed)\b", text):
            return p
    return steps[-1] if steps else None


def step_file(root: Path, step: str | None = None) -> Path | None:
    """The current step's ``STEP.md`` under ``.personae/project/goals/`` (the one the
    step and step research sections read): ``step`` names one (``NN-goal/NN-step`` or
    the step folder's name; an unknown name is a :class:`ConfigError`), else the one
    STATE.md names as current, else the first not done. ``None``: no steps."""
    base = Layout(root).docs
    if not _is_dir(base):
        return None
    return _current_step(base, step, _read(base / "STATE.md"))


def _docs(folder: Path, names: tuple[str, ...]) -> tuple[str | None, list[str]]:
    parts, used = [], []
    for name in dict.fromkeys(names):
        text = _read(folder / name)
        if text is not None:
            parts.append(f"## {name}\n\n{text}")
            used.append(str(folder / name))
    return ("\n\n".join(parts) if parts else None), used


def _summary_of(folder: Path, names: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """A stand-in for the chosen files: each ``X_SUMMARY.md`` in place of its ``X.md``
    (files without one stay whole), else the folder's ``SUMMARY.md``."""
    parts, used, any_summary = [], [], False
    for name in dict.fromkeys(names):
        stem = name[:-3] if name.endswith(".md") else name
        summary = _read(folder / f"{stem}_SUMMARY.md")
        if summary is not None:
            parts.append(f"## {stem}_SUMMARY.md\n\n{summary}")
            used.append(str(folder / f"{stem}_SUMMARY.md"))
            any_summary = True
            continue
        text = _read(folder / name)
        if text is not None:
            parts.append(f"## {name}\n\n{text}")
            used.append(str(folder / name))
    if any_summary:
        return "\n\n".join(parts), used
    whole = _read(folder / "SUMMARY.md")
    return (f"## SUMMARY.md\n\n{whole}", [str(folder / "SUMMARY.md")]) if whole else (None, [])


def _reference(folder: Path) -> tuple[str | None, list[str]]:
    """Every ``*.md`` under ``reference/`` (sorted by name; symlinks and special files skipped)."""
    if not _is_dir(folder) or _is_link(folder):
        return None, []
    names = tuple(p.name for p in sorted(folder.glob("*.md")) if _is_file(p) and not _is_link(p))
    return _docs(folder, names)


def _put_docs(
    texts: dict[str, str], files: dict[str, str], key: str, folder: Path, names: tuple[str, ...]
) -> None:
    """The named files of ``folder`` under ``key``, and their summary stand-in under
    ``key:summary`` when it is shorter."""
    text, used = _docs(folder, names)
    if text is not None:
        texts[key], files[key] = text, ", ".join(used)
        alt, alt_used = _summary_of(folder, names)
        if alt is not None and len(alt) < len(text):
            texts[f"{key}:summary"], files[f"{key}:summary"] = alt, ", ".join(alt_used)


def read_named(root: Path, source: str, names: tuple[str, ...]) -> ProjectFiles:
    """``research``/``codebase`` files named by a profile (skill-level profiles), with their
    summary stand-in, under the section's content key."""
    texts: dict[str, str] = {}
    files: dict[str, str] = {}
    folder = Layout(root).docs / source
    if _is_dir(folder):
        _put_docs(texts, files, f"{source}:{'+'.join(names)}", folder, names)
    return ProjectFiles(texts=texts, files=files)


def resolve_task(root: Path, task: str | None) -> tuple[str | None, str | None]:
    """A task given as a task file name (``tasks/NAME.md``) is read; otherwise it is the text."""
    if not task:
        return None, None
    base = Layout(root).docs
    if "\n" not in task and len(task) < 200:
        for folder in [base / "tasks", *(p.parent / "tasks" for p in _steps(base))]:
            if not _is_dir(folder):
                continue
            for cand in (folder / task, folder / f"{task}.md"):
                if _is_file(cand):
                    return _read(cand), str(cand)
    return task, "--task"


def read_project(root: Path, *, task: str | None, step: str | None = None) -> ProjectFiles:
    """Read ``.personae/project/`` for this turn."""
    base = Layout(root).docs
    texts: dict[str, str] = {}
    files: dict[str, str] = {}

    def put(key: str, path: Path) -> str | None:
        text = _read(path)
        if text is not None:
            texts[key], files[key] = text, str(path)
        return text

    if not _is_dir(base):
        return ProjectFiles(task_type=detect_task_type(task))
    put("vision", base / "VISION.md")
    put("gameplan", base / "GAMEPLAN.md")
    state = put("state", base / "STATE.md")
    without: str | None = None
    current = _current_step(base, step, state)
    if current is not None:
        text = put("step", current)
        if text is not None:
            without, decisions = split_decisions(text)
            if decisions:
                texts["decisions"], files["decisions"] = decisions, f"{current} (## Decisions)"
        put("step_research", current.parent / "RESEARCH.md")
    put("research_summary", base / "research" / "SUMMARY.md")
    put("codebase_summary", base / "codebase" / "SUMMARY.md")
    kind = detect_task_type(task)
    _, code_files, research_files = TASK_TYPES[kind]
    for key, folder, names in (
        ("codebase", base / "codebase", code_files),
        ("research", base / "research", research_files),
    ):
        _put_docs(texts, files, key, folder, names)
    ref, ref_used = _reference(base / "reference")
    if ref is not None:
        texts["reference"], files["reference"] = ref, ", ".join(ref_used)
    return ProjectFiles(texts=texts, files=files, step_without_decisions=without, task_type=kind)
