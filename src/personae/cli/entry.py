"""The console-script entry point: a fast path for hook gates, else the Typer app.

Hooks run on every host tool call, so ``personae hook pre-tool-use`` must not
pay for importing Typer, rich and pydantic-ai.
"""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def _quiet_third_parties() -> None:
    """Keep other libraries' banners out of our output (before they are imported).

    pydantic-ai prints a first-run banner (its logo and a Logfire advertisement) on stderr
    when it is a terminal; ``PYDANTIC_AI_NO_BANNER`` is its documented off switch. Child
    processes (handover runs, the MCP server) inherit it. Process-wide, so it is set here,
    in the entry point, and not by :func:`personae.cli.app.run_cli`, which tests call in
    process.
    """
    os.environ.setdefault("PYDANTIC_AI_NO_BANNER", "1")


def main() -> None:
    """Run ``personae`` with ``sys.argv`` and exit with its code."""
    args = sys.argv[1:]
    if args[:2] == ["hook", "pre-tool-use"] and "--help" not in args:
        # local import: the hook gate runs on every tool call: no typer, no CLI app
        from personae.hosts.gate import run as run_gate

        sys.exit(run_gate(args[2:]))
    _quiet_third_parties()
    try:
        # local import: the gate path above does not pay for the CLI app
        from personae.cli.app import run_cli
    except KeyboardInterrupt:  # Ctrl-C while the CLI is still importing
        print("personae: interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(run_cli(args))
