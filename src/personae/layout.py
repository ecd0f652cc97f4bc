"""Where a project keeps its files: every path under ``.personae/``, in one place.

Standard library only: the hook gate (run on every tool call) imports it.
:class:`personae.project.Project` (root plus config) exposes the same layout.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CONFIG_NAMES",
    "CONTROL_DIRS",
    "CONTROL_FILES",
    "CONTROL_NAMES",
    "DIR_NAME",
    "GRANTABLE",
    "MAX_CONFIG_BYTES",
    "PROFILES_NAMES",
    "SESSION_ID",
    "Layout",
    "control_name",
    "find_root",
    "first_present",
    "user_data_dir",
]

DIR_NAME = ".personae"
"""The project folder's name inside the working directory."""
CONFIG_NAMES = ("config.yaml", "config.yml", "config")
"""Names the project config may have under ``.personae/`` (the first existing one is read)."""
MAX_CONFIG_BYTES = 1_000_000
"""Largest project config file read (the config's reader and the store's both refuse more)."""
PROFILES_NAMES = ("profiles.yaml", "profiles.yml")
"""Names the role profiles file may have under ``.personae/`` (the first existing one is read)."""
SESSION_ID = re.compile(r"[\w.:@/-]{1,200}")
"""A session id a host or caller may give (use ``SESSION_ID.fullmatch``)."""


def user_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """The user's personae data folder: ``PERSONAE_HOME``, else ``~/.personae``
    (the same default as ``PersonaeSettings.home``). It is never a project's folder."""
    env = os.environ if environ is None else environ
    home = env.get("PERSONAE_HOME")
    return Path(home).expanduser() if home else Path.home() / DIR_NAME


def find_root(start: Path | str = ".") -> Path | None:
    """The nearest folder at or above ``start`` that holds a ``.personae/`` folder.

    ``None`` when no folder up to the file-system root has one (like git's search for
    ``.git``). The user's data folder (``~/.personae``, :func:`user_data_dir`) marks no
    project: the home folder is never one, or every folder below it would be.
    ``start`` is resolved first, so symlinked folders walk up their target.
    Standard library and a few stats only: the hook gate uses it on every tool call.
    """
    here = Path(start).resolve()
    data: Path | None = None
    for folder in (here, *here.parents):
        marker = Layout(folder).dir
        if marker.is_dir():
            if data is None:
                data = _resolved(user_data_dir())
            if _resolved(marker) != data:
                return folder
    return None


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a link loop: compare as written
        return path.absolute()


def first_present(candidates: Iterable[Path]) -> Path | None:
    """The first candidate that is there and is not a folder (``None``: none is).

    A link counts even when it dangles, and so does a FIFO or a device: reading it then
    fails with a clear error instead of the file being silently skipped.
    """
    for path in candidates:
        if os.path.lexists(path) and not path.is_dir():
            return path
    return None


# Control paths: what governs later runs, git and host sessions, in a workspace's root.
# Read-only to a contained agent (personae.tools.control).
CONTROL_DIRS = (".personae", ".git", ".claude", ".codex", ".gemini", ".github", ".vscode")
"""Control folders (a placeholder for a missing one is an empty folder)."""
CONTROL_FILES = (".mcp.json", "CLAUDE.md", "CLAUDE.local.md", "AGENTS.md",
                 "AGENTS.override.md", "GEMINI.md")  # fmt: skip
"""Control files (a placeholder for a missing one is an empty file)."""
CONTROL_NAMES = CONTROL_DIRS + CONTROL_FILES
"""Every control name, as it appears in the workspace root."""
GRANTABLE = tuple(n for n in CONTROL_NAMES if n != DIR_NAME)
"""Names ``sandbox.control_write`` may grant (never ``.personae``: it holds the grants)."""

_FOLDED = {name.casefold(): name for name in CONTROL_NAMES}


def control_name(relative: str | Path) -> str | None:
    """The control name ``relative`` (a path relative to the workspace root) falls under.

    Compared without regard to letter case (a case-insensitive file system
    would map ``claude.md`` onto ``CLAUDE.md``); ``None`` for any other path.
    """
    parts = Path(relative).parts
    if not parts or parts[0] in (".", ".."):
        return None
    return _FOLDED.get(parts[0].casefold())


@dataclass(frozen=True)
class Layout:
    """Where a project keeps its files under ``root/.personae/`` (paths only: nothing is read).

    The one place that knows the layout; :class:`Project` (root plus config) has one too.
    """

    root: Path
    """The working directory (as given; not resolved)."""
    data_dir: Path | None = field(default=None, kw_only=True)
    """The folder that holds the files instead of ``root/.personae`` (the user's data
    folder, for :meth:`for_mind` outside any project); ``None``: ``root/.personae``."""

    @classmethod
    def find(cls, start: Path | str) -> Layout:
        """The layout of the project ``start`` belongs to (:func:`find_root`), else of
        ``start`` itself: where a command run in a subfolder keeps its files."""
        return cls(find_root(start) or Path(start))

    @classmethod
    def for_mind(cls, start: Path | str) -> Layout:
        """Where the mind (``personae serve``, the hook gate) keeps its store, memory and
        prompt for a host working in ``start``: the project's ``.personae/`` when ``start``
        is in one, else the user's data folder (:func:`user_data_dir`), which never marks a
        project: a host started in any folder gets a mind without making that folder one."""
        root = find_root(start)
        if root is not None:
            return cls(root)
        return cls(Path(start), data_dir=user_data_dir())

    @property
    def dir(self) -> Path:
        """The ``.personae/`` folder (may not exist)."""
        return self.data_dir if self.data_dir is not None else self.root / DIR_NAME

    @property
    def state_db(self) -> Path:
        """The project's SQLite store (runs, sessions, the handover ledger, the mind)."""
        return self.dir / "state.db"

    @property
    def config_files(self) -> tuple[Path, ...]:
        """Candidate config files, the first existing one wins."""
        return tuple(self.dir / name for name in CONFIG_NAMES)

    @property
    def config_file(self) -> Path | None:
        """The config file that is read (``None``: there is none, defaults apply)."""
        return first_present(self.config_files)

    @property
    def profiles_file(self) -> Path | None:
        """The role profiles file that is read (``None``: only the built-in profiles)."""
        return first_present(self.dir / name for name in PROFILES_NAMES)

    @property
    def directive(self) -> Path:
        """The project's directive (before ``AGENTS.md`` and ``CLAUDE.md``)."""
        return self.dir / "directive.md"

    @property
    def handovers(self) -> Path:
        """Handover files ``personae handover create`` writes."""
        return self.dir / "handovers"

    @property
    def memory(self) -> Path:
        """The mind's memory folder."""
        return self.dir / "memory"

    @property
    def mind_prompt(self) -> Path:
        """The mind contract prompt."""
        return self.dir / "mind.md"

    @property
    def chains(self) -> Path:
        """Chain checkpoints, one folder per workflow."""
        return self.dir / "chains"

    @property
    def mcp_json(self) -> Path:
        """The project's MCP server list."""
        return self.dir / "mcp.json"

    @property
    def plugins(self) -> Path:
        """Plugin folders (each with personas, skills, ``.mcp.json``)."""
        return self.dir / "plugins"

    @property
    def docs(self) -> Path:
        """Project documents (vision, gameplan, state, goals, tasks ...)."""
        return self.dir / "project"
