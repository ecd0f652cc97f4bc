"""Which project a command acts on: ``--root`` when given, else the one found walking up."""

from __future__ import annotations

from pathlib import Path

from personae.layout import find_root

__all__ = ["ROOT_HELP", "project_root"]

ROOT_HELP = (
    "Project folder (default: the nearest folder holding .personae/, from the current one up; "
    "else the current folder)."
)


def project_root(root: Path | None = None) -> Path:
    """``root`` resolved when given; else the project the current folder belongs to.

    Found like git finds its repository (:func:`personae.layout.find_root`); the
    current folder when no folder up to ``/`` holds ``.personae/``.
    """
    if root is not None:
        return root.resolve()
    here = Path.cwd()
    return find_root(here) or here
