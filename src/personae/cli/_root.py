"""Which project a command acts on: ``--root`` when given, else the one found walking up."""

from __future__ import annotations

from pathlib import Path

from personae.errors import UsageError
from personae.layout import find_root

__all__ = ["ROOT_HELP", "NotInProjectError", "project_root"]

ROOT_HELP = (
    "Project folder (default: the nearest folder holding .personae/, from the current one up; "
    "else the current folder)."
)


class NotInProjectError(UsageError):
    """A command that stores something was run outside any project: it writes nothing."""

    def __init__(self, here: Path) -> None:
        super().__init__(
            f"no personae project in {here} or any folder above it (no .personae/ folder); "
            "run 'personae init' in the project's top folder first (nothing was written)"
        )


def project_root(root: Path | None = None, *, required: bool = False) -> Path:
    """``root`` resolved when given; else the project the current folder belongs to.

    Found like git finds its repository (:func:`personae.layout.find_root`); the
    current folder when no folder up to ``/`` holds ``.personae/``, or, when
    ``required`` (a command that would store something there), :class:`NotInProjectError`
    (also for a ``root`` that is in no project): a folder never becomes a project by accident.
    """
    if root is not None:
        if required and find_root(root) is None:
            raise NotInProjectError(root.resolve())
        return root.resolve()
    here = Path.cwd()
    found = find_root(here)
    if found is None and required:
        raise NotInProjectError(here.resolve())
    return found or here
