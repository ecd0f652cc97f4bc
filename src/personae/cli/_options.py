"""Option types that several commands declare, each written once."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from personae.cli._root import ROOT_HELP
from personae.layout import Layout
from personae.limits import DEFAULTS

__all__ = [
    "AddressOpt",
    "CallTimeoutOpt",
    "DeadlineOpt",
    "ExecutorOpt",
    "JsonOpt",
    "MaxCostOpt",
    "MaxRequestsOpt",
    "MaxTokensTotalOpt",
    "MemoryDirOpt",
    "MindPromptOpt",
    "RootOpt",
    "StoreOpt",
    "WindowOpt",
    "call_line",
    "show_call",
    "with_options",
]

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

_DEFAULT = Layout(Path())
"""The project layout relative to the working directory, for help texts."""


def _path_option(flag: str, what: str, default: Path) -> Any:
    """A path option whose help names its default as :class:`Layout` places it."""
    return typer.Option(flag, help=f"{what} (default {default.as_posix()}).")


MemoryDirOpt = Annotated[
    Path | None, _path_option("--memory-dir", "Memory folder", _DEFAULT.memory)
]
"""``--memory-dir``: the mind's memory folder (``serve``, ``doctor``)."""
MindPromptOpt = Annotated[
    Path | None, _path_option("--prompt", "Mind contract prompt file", _DEFAULT.mind_prompt)
]
"""``--prompt``: the mind contract prompt file (``serve``, ``doctor``)."""
StoreOpt = Annotated[Path | None, _path_option("--store", "SQLite store", _DEFAULT.state_db)]
"""``--store``: the mind's SQLite store (``serve``, ``doctor``)."""


Command = Callable[..., Any]
"""A typer command function (or the declaration of shared options)."""


def _parameters(function: Command) -> list[inspect.Parameter]:
    """``function``'s parameters with their annotations evaluated (typer needs the types).

    Only the parameters': the return annotation may name a type imported for mypy only.
    """
    names = inspect.unwrap(function).__globals__
    return [
        p.replace(annotation=eval(p.annotation, names))  # the module's own annotation text
        if isinstance(p.annotation, str)
        else p
        for p in inspect.signature(function).parameters.values()
    ]


def with_options(
    declared: Command, *, own_before: str | None = None
) -> Callable[[Command], Command]:
    """A decorator giving typer commands the options ``declared``'s signature declares.

    Typer cannot share parameters between commands (its issue #153), so the options several
    commands share are declared once, as the parameters of ``declared`` (never called). The
    decorated command's signature (a ``typer.Context`` first, then the command's own options)
    is widened with them: the command's own options go before the declared one named
    ``own_before`` (default: after all of them), the order ``--help`` lists them in. A
    parameter of the command named like a declared one (no typer annotation) is not an option
    of its own: it receives the declared option's value. The others are in ``ctx.params``.
    """
    shared = _parameters(declared)
    names = [p.name for p in shared]
    split = names.index(own_before) if own_before is not None else len(shared)

    def widen(command: Command) -> Command:
        takes = _parameters(command)
        own = [p for p in takes[1:] if p.name not in names]

        @functools.wraps(command)
        def call(**values: Any) -> None:
            command(**{p.name: values[p.name] for p in takes})

        params = [takes[0], *shared[:split], *own, *shared[split:]]
        call.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        return call

    return widen


WindowOpt = Annotated[
    int | None,
    typer.Option(
        "--window", min=256, metavar="TOKENS",
        help="The model's context window in tokens (default: the config's models: entry, "
        "what the server tells, else a guess with a warning).",
    ),
]  # fmt: skip
CallTimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--call-timeout", min=0.001, metavar="SECONDS",
        help=f"Seconds each model call may take (defaults: Manager {DEFAULTS.manager_timeout:g}, "
        f"Worker {DEFAULTS.worker_timeout:g}, Validator {DEFAULTS.validator_timeout:g}; config "
        "timeouts:).",
    ),
]  # fmt: skip


def _run_cap(
    flag: str, metavar: str, what: str, source: str = "config limits:", least: int | None = 1
) -> Any:
    """A cap on a run and every run it starts (the tree shares it)."""
    help_text = f"Most {what} for the run and every run it starts ({source})."
    return typer.Option(flag, min=least, metavar=metavar, help=help_text)


MaxRequestsOpt = Annotated[int | None, _run_cap("--max-requests", "CALLS", "model requests")]
MaxTokensTotalOpt = Annotated[
    int | None, _run_cap("--max-tokens-total", "TOKENS", "tokens (in + out)")
]
MaxCostOpt = Annotated[
    float | None, _run_cap("--max-cost", "COST", "cost", "needs prices: in config", None)
]
DeadlineOpt = Annotated[
    float | None,
    typer.Option(
        "--deadline", min=0.001, metavar="SECONDS",
        help="Seconds after which no model request starts; the run ends with what is done "
        f"(default {DEFAULTS.run_deadline:g}; config timeouts.run).",
    ),
]  # fmt: skip


def show_call(status: Any, event: Any) -> None:
    """Show a model call in progress on the live view's spinner (``None``: no spinner)."""
    if status is not None:
        status.update(call_line(event))


def call_line(event: Any) -> str:
    """The live view's line for a model call starting, streaming or ending (a ``call``
    event)."""
    data = event.data
    where = f" (subtask {event.subtask})" if event.subtask else ""
    if data.get("phase") == "start":
        return (
            f"{data.get('role')}{where}: waiting for {data.get('model')} (at most "
            f"{data.get('max_tokens')} tokens, {float(data.get('timeout') or 0):g} s)"
        )
    if data.get("phase") == "tokens":
        return (
            f"{data.get('role')}{where}: {data.get('model')} writing, "
            f"{data.get('output_tokens')} of at most {data.get('max_tokens')} tokens so far "
            f"({float(data.get('seconds') or 0):.1f} of {float(data.get('timeout') or 0):g} s)"
        )
    return (
        f"{data.get('role')}{where}: {data.get('model')} answered {data.get('output_tokens')} "
        f"tokens in {float(data.get('seconds') or 0):.1f} s"
    )
