"""The ``personae`` command: one Typer app, one module per noun.

``run_cli()`` maps every :class:`~personae.errors.PersonaeError` to one line on
stderr and exit 1, and bad CLI usage (click's own usage errors, and
:class:`~personae.errors.CommandLineError`) to one line and exit 2. No tracebacks and
no usage boxes for user mistakes.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from typer._click import exceptions as click_errors  # typer's own click (vendored)
from typer.exceptions import TyperException

from personae import __version__
from personae.cli import (
    batch,
    chain,
    context,
    handover,
    hosts,
    personas,
    project,
    run,
    runs,
    runs_replay,  # noqa: F401 (registers replay, compare and diff on runs_app)
    serve,
    step,
    ui,
)
from personae.cli._fast_help import convert_lazily, prime_rich_help
from personae.cli._pipes import BROKEN_PIPE_EXIT, silence_stdout
from personae.cli.completion import COMPLETION_FLAGS, run_completion
from personae.errors import CommandLineError, ConfigError, PersonaeError

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
app.add_typer(runs.runs_app, name="runs")  # with runs_replay's replay, compare, diff
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
step.register(app)
convert_lazily(app)  # `personae --help` converts none of them (personae.cli._fast_help)


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


def _usage_line(exc: click_errors.UsageError) -> str:
    """One line for bad command-line usage: the command, click's message, where help is."""
    message = " ".join(exc.format_message().split()).rstrip(".")
    path = exc.ctx.command_path if exc.ctx is not None else "personae"
    command = path.removeprefix("personae").strip()
    where = f"{command}: " if command else ""
    return f"personae: error: {where}{message} (see '{path} --help')"


def run_cli(argv: list[str] | None = None) -> int:
    """Run the CLI; returns (and, without ``argv``, exits with) the process exit code.

    Bad command-line usage (an unknown option, a missing argument, a bad value) is one
    line on stderr and exit 2; every PersonaeError (and any OSError about a file or
    folder) one line and exit 1, or 2 when it is :class:`CommandLineError` or a mistake in
    the configuration (:class:`ConfigError`, whichever command read it); Ctrl-C prints
    ``personae: interrupted`` and exits 130.
    """
    args = sys.argv[1:] if argv is None else argv
    if not args or "--help" in args:
        prime_rich_help()
    code: int
    try:
        if args and args[0] in COMPLETION_FLAGS:  # Typer's own ignore a named shell
            result = run_completion(args)
        else:
            result = app(args=args, prog_name="personae", standalone_mode=False)
        code = result if isinstance(result, int) else 0  # an Exit's code (--help: 0)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except click_errors.NoArgsIsHelpError as exc:  # `personae runs`: its help
        exc.show()
        code = exc.exit_code
    except click_errors.UsageError as exc:
        print(_usage_line(exc), file=sys.stderr)
        code = exc.exit_code
    except TyperException as exc:
        print(f"personae: error: {' '.join(exc.format_message().split())}", file=sys.stderr)
        code = exc.exit_code
    except typer.Abort:  # end of input or Ctrl-C at a prompt
        print("personae: aborted", file=sys.stderr)
        code = 1
    except (CommandLineError, ConfigError) as exc:  # usage; a config file's mistake too
        print(f"personae: error: {exc}", file=sys.stderr)
        code = 2
    except PersonaeError as exc:
        print(f"personae: error: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = _INTERRUPTED
    except BrokenPipeError:  # the reader went away (`personae ... | head`): stop quietly
        silence_stdout()
        code = BROKEN_PIPE_EXIT
    except OSError as exc:  # a file or folder the user named is missing, unreadable, ...
        print(f"personae: error: {_describe_os_error(exc)}", file=sys.stderr)
        code = 1
    if code == _INTERRUPTED:  # Typer turns Ctrl-C into a silent exit 130
        print("personae: interrupted", file=sys.stderr)
    if argv is None:
        sys.exit(code)
    return code
