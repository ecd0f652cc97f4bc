"""The ``personae`` command: one Typer app, one module per noun.

``run_cli()`` maps every :class:`~personae.errors.PersonaeError` to one line on
stderr and exit 1, and bad CLI usage to exit 2. No tracebacks for user mistakes.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from personae import __version__
from personae.cli import batch, chain, context, handover, hosts, personas, project, run, serve, ui
from personae.cli._pipes import BROKEN_PIPE_EXIT, silence_stdout
from personae.errors import PersonaeError

__all__ = ["app", "run_cli"]

_HELP = (
    "Persona and context engine for multi-agent LLM systems.\n\n"
    "Commands act on the project of the current folder: the nearest folder holding "
    ".personae/, from the current one up (as git finds its repository); "
    "`personae doctor` shows which one."
)

app = typer.Typer(
    name="personae",
    help=_HELP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"personae {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Persona and context engine for multi-agent LLM systems (see ``_HELP``)."""


app.add_typer(personas.app, name="personas")
app.add_typer(context.app, name="context")
app.add_typer(run.runs_app, name="runs")
app.add_typer(handover.app, name="handover")
app.add_typer(chain.app, name="chain")
app.add_typer(hosts.app, name="hosts")
app.add_typer(hosts.hook_app, name="hook")
project.register(app)
run.register(app)
serve.register(app)
hosts.register(app)
ui.register(app)
batch.register(app)


_INTERRUPTED = 130


def _describe_os_error(exc: OSError) -> str:
    """``path: reason`` (or ``path -> other: reason``) without the errno noise."""
    reason = exc.strerror or str(exc)
    if exc.filename is None:
        return reason
    where = str(exc.filename)
    if exc.filename2 is not None:
        where += f" -> {exc.filename2}"
    return f"{where}: {reason}"


def run_cli(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and, without ``argv``, exits with) the process exit code.

    Typer handles bad usage itself (message and exit 2); every PersonaeError
    (and any OSError about a file or folder) becomes one line on stderr and
    exit 1; Ctrl-C prints ``personae: interrupted`` and exits 130.
    """
    args = sys.argv[1:] if argv is None else argv
    code: int
    try:
        app(args=args, prog_name="personae", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == _INTERRUPTED:  # Typer turns Ctrl-C into a silent exit 130
            print("personae: interrupted", file=sys.stderr)
    except PersonaeError as exc:
        print(f"personae: error: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        print("personae: interrupted", file=sys.stderr)
        code = _INTERRUPTED
    except BrokenPipeError:  # the reader went away (`personae ... | head`): stop quietly
        silence_stdout()
        code = BROKEN_PIPE_EXIT
    except OSError as exc:  # a file or folder the user named is missing, unreadable, ...
        print(f"personae: error: {_describe_os_error(exc)}", file=sys.stderr)
        code = 1
    else:
        code = 0
    if argv is None:
        sys.exit(code)
    return code
