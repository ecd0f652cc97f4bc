"""Where a project keeps its files: every path under ``.personae/``, in one place.

Standard library only: the hook gate (run on every tool call) imports it.
:class:`personae.project.Project` (root plus config) exposes the same layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CONFIG_NAMES", "DIR_NAME", "SESSION_ID", "Layout"]

DIR_NAME = ".personae"
"""The project folder's name inside the working directory."""
CONFIG_NAMES = ("config.yaml", "config.yml", "config")
"""Names the project config may have under ``.personae/`` (the first existing one is read)."""
SESSION_ID = re.compile(r"[\w.:@/-]{1,200}")
"""A session id a host or caller may give (use ``SESSION_ID.fullmatch``)."""


@dataclass(frozen=True)
class Layout:
    """Where a project keeps its files under ``root/.personae/`` (paths only: nothing is read).

    The one place that knows the layout; :class:`Project` (root plus config) has one too.
    """

    root: Path
    """The working directory (as given; not resolved)."""

    @property
    def dir(self) -> Path:
        """The ``.personae/`` folder (may not exist)."""
        return self.root / DIR_NAME

    @property
    def state_db(self) -> Path:
        """The project's SQLite store (runs, sessions, the handover ledger, the mind)."""
        return self.dir / "state.db"

    @property
    def config_files(self) -> tuple[Path, ...]:
        """Candidate config files, the first existing one wins."""
        return tuple(self.dir / name for name in CONFIG_NAMES)

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
