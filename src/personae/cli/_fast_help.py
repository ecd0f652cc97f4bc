"""What ``personae --help`` does not pay for: the noun groups' commands, markdown, tracebacks.

Two costs made a fresh ``personae --help`` take about 0.35 s of CPU, and neither
changes what the help shows:

- **Every command converted.** Typer turns each command function into a click
  command (reading its signature and evaluating its annotations) before it can
  show anything. The root help lists the commands and noun groups (``run``,
  ``runs``, ``handover`` ...) by their help only, so :class:`LazyRoot` converts
  one when it is first *used*, and lists it from its registered help meanwhile.
- **Markdown and tracebacks loaded.** ``typer.rich_utils`` imports ``rich.markdown``
  (markdown-it) and ``rich.traceback`` (pygments, attrs) at its top, for the
  ``markdown`` markup mode and for pretty tracebacks: our CLI uses neither (rich
  markup, ``pretty_exceptions_enable=False``). :func:`prime_rich_help` imports it
  with stand-ins that load the real class the first time one is called.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from collections.abc import Mapping, MutableMapping
from typing import Any, ClassVar

import typer
from typer._click import Command, Context, HelpFormatter  # typer's own click (vendored)
from typer.core import TyperCommand, TyperGroup
from typer.main import (
    get_command_from_info,
    get_command_name,
    get_group_from_info,
    solve_typer_info_defaults,
)
from typer.models import CommandInfo, TyperInfo

__all__ = ["LazyRoot", "convert_lazily", "prime_rich_help"]


class _Markdown:
    """Stands for ``rich.markdown.Markdown`` in ``typer.rich_utils`` until one is made."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # local import: the point of the stand-in (markdown-it loads only when used)
        from rich.markdown import Markdown

        return Markdown(*args, **kwargs)


class _Traceback:
    """Stands for ``rich.traceback.Traceback`` in ``typer.rich_utils`` until one is made."""

    @classmethod
    def from_exception(cls, *args: Any, **kwargs: Any) -> Any:
        """``rich.traceback.Traceback.from_exception``."""
        # local import: the point of the stand-in (pygments loads only when used)
        from rich.traceback import Traceback

        return Traceback.from_exception(*args, **kwargs)


def prime_rich_help() -> None:
    """Import ``typer.rich_utils`` without loading ``rich.markdown`` and ``rich.traceback``.

    The stand-ins are in ``sys.modules`` only while it imports, so anything else that
    imports those modules gets the real ones. When ``typer.rich_utils`` is already
    imported, or asks these modules for a name the stand-ins lack (a newer typer),
    it is imported as usual.
    """
    if "typer.rich_utils" in sys.modules:
        return
    stand_ins: dict[str, types.ModuleType] = {}
    for name, attr, value in (
        ("rich.markdown", "Markdown", _Markdown),
        ("rich.traceback", "Traceback", _Traceback),
    ):
        if name not in sys.modules:
            module = types.ModuleType(name)
            setattr(module, attr, value)
            stand_ins[name] = module
    sys.modules.update(stand_ins)
    try:
        importlib.import_module("typer.rich_utils")
    except ImportError:
        sys.modules.pop("typer.rich_utils", None)
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
    importlib.import_module("typer.rich_utils")  # as usual, when the stand-ins did not do


class LazyRoot(TyperGroup):
    """The root command: each subcommand is converted the first time it is used.

    Listing one (the root's help) needs only its help; running it, showing its own
    help, or reading :attr:`commands` converts it exactly as Typer would have.
    """

    entries: ClassVar[Mapping[str, CommandInfo | TyperInfo]] = {}
    """The subcommands and noun groups by name, in the order the root help lists them."""

    def __init__(self, **kwargs: Any) -> None:
        self._own: dict[str, Command] = {}
        self._listing = False
        super().__init__(**kwargs)

    @property  # type: ignore[override]
    def commands(self) -> MutableMapping[str, Command]:
        """Every subcommand, converted."""
        for name in self.entries:
            self._convert(name)
        return self._own

    @commands.setter
    def commands(self, value: Mapping[str, Command]) -> None:
        self._own = dict(value)

    def list_commands(self, ctx: Context) -> list[str]:
        """The subcommands in the order they were added (commands, then groups)."""
        return [*self._own, *(name for name in self.entries if name not in self._own)]

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        """The subcommand ``cmd_name``; while the root formats its help, its summary only."""
        if cmd_name in self._own or cmd_name not in self.entries:
            return self._own.get(cmd_name)
        if self._listing:
            return self._summary(cmd_name)
        return self._convert(cmd_name)

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        """The root's help: the subcommands listed by their help, none converted."""
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def _convert(self, name: str) -> Command:
        if name not in self._own:
            entry = self.entries[name]
            if isinstance(entry, TyperInfo):
                self._own[name] = get_group_from_info(
                    entry,
                    pretty_exceptions_short=_PRETTY_EXCEPTIONS_SHORT,
                    rich_markup_mode=self.rich_markup_mode,
                    suggest_commands=self.suggest_commands,
                )
            else:
                self._own[name] = get_command_from_info(
                    entry,
                    pretty_exceptions_short=_PRETTY_EXCEPTIONS_SHORT,
                    rich_markup_mode=self.rich_markup_mode,
                )
        return self._own[name]

    def _summary(self, name: str) -> Command:
        """The subcommand with its help and nothing else (what the root's help shows)."""
        entry = self.entries[name]
        if isinstance(entry, TyperInfo):
            info = solve_typer_info_defaults(entry)
            return TyperGroup(
                name=name,
                help=info.help,
                short_help=info.short_help,
                hidden=info.hidden,
                deprecated=info.deprecated,
                rich_help_panel=info.rich_help_panel,
                rich_markup_mode=self.rich_markup_mode,
            )
        doc = entry.help
        return TyperCommand(
            name=name,
            help=inspect.getdoc(entry.callback) if doc is None else inspect.cleandoc(doc),
            short_help=entry.short_help,
            hidden=entry.hidden,
            deprecated=entry.deprecated,
            rich_help_panel=entry.rich_help_panel,
            rich_markup_mode=self.rich_markup_mode,
        )


_PRETTY_EXCEPTIONS_SHORT = True
"""Typer's default, which the root app keeps (its pretty exceptions are off)."""


def convert_lazily(app: typer.Typer) -> None:
    """Make ``app`` (the root) convert its subcommands when first used (:class:`LazyRoot`).

    Call it once every command and group is added: it moves them from the app to the
    root command's class, so that Typer does not convert them all up front.
    """
    entries: dict[str, CommandInfo | TyperInfo] = {}
    for command in app.registered_commands:
        assert command.callback is not None
        entries[command.name or get_command_name(command.callback.__name__)] = command
    for group in app.registered_groups:
        assert group.name, "a noun group needs its name"
        entries[group.name] = group
    app.info.cls = type("PersonaeRoot", (LazyRoot,), {"entries": entries})
    app.registered_commands = []
    app.registered_groups = []
