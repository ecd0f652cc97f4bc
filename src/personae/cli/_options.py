"""Option types that several commands declare, each written once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from personae.cli._root import ROOT_HELP

__all__ = ["AddressOpt", "ExecutorOpt", "JsonOpt", "RootOpt"]

RootOpt = Annotated[
    Path | None,
    typer.Option("--root", help=ROOT_HELP, exists=True, file_okay=False),
]
"""``--root``: the project folder (resolve it with :func:`personae.cli._root.project_root`)."""

JsonOpt = Annotated[bool, typer.Option("--json", help="JSON output.")]
"""``--json``: machine-readable output instead of text."""

ExecutorOpt = Annotated[
    str, typer.Option("--executor", help="Where each run goes: local or ray (the ray extra).")
]
"""``--executor``: ``local`` child processes or ``ray`` tasks (``chain run``, ``batch``)."""

AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="Ray cluster (auto or HOST:PORT); default: a private one."),
]
"""``--address``: the Ray cluster to join (``--executor ray`` only)."""
