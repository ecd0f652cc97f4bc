"""Shell completion: ``personae --install-completion [SHELL]`` and ``--show-completion [SHELL]``.

Typer's own options detect the shell from the process tree and ignore a shell the
user names, so under a process with no shell among its ancestors (a Dockerfile
``RUN`` line, a CI agent, ``nohup``) they fail with "Shell None is not supported".
Here the shell is the one named, else the detected one, else ``$SHELL``'s name,
and a shell that cannot be told is one line and exit 2.
"""

from __future__ import annotations

import os
from pathlib import Path

import shellingham
import typer
from typer._completion_shared import get_completion_script, install

from personae.errors import CommandLineError

__all__ = ["COMPLETION_FLAGS", "SHELLS", "run_completion"]

COMPLETION_FLAGS = ("--install-completion", "--show-completion")
"""The root options this module answers (given first, as Typer's are)."""

SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
"""The shells completion can be installed for."""

_PROG = "personae"
_COMPLETE_VAR = "_PERSONAE_COMPLETE"


def _shell(flag: str, named: list[str]) -> str:
    """The shell to complete for: the one named, else detected, else ``$SHELL``'s."""
    if len(named) > 1:
        raise CommandLineError(f"{flag}: one shell at most, got {' '.join(named)}")
    if named:
        shell = named[0].lower()
        if shell not in SHELLS:
            raise CommandLineError(
                f"{flag}: unknown shell {named[0]!r}; one of {', '.join(SHELLS)}"
            )
        return shell
    try:
        detected = str(shellingham.detect_shell()[0]).lower()
    except shellingham.ShellDetectionFailure:
        detected = ""
    if detected in SHELLS:
        return detected
    from_env = Path(os.environ.get("SHELL", "")).name.lower()
    if from_env in SHELLS:
        return from_env
    raise CommandLineError(f"{flag}: cannot tell your shell; name it, e.g. {flag} bash")


def run_completion(args: list[str]) -> int:
    """Install or print the completion script ``args`` ask for; the exit code.

    ``args`` start with one of :data:`COMPLETION_FLAGS`, then at most a shell name.
    """
    flag, named = args[0], args[1:]
    shell = _shell(flag, named)
    if flag == "--show-completion":
        typer.echo(get_completion_script(prog_name=_PROG, complete_var=_COMPLETE_VAR, shell=shell))
        return 0
    done, path = install(shell=shell, prog_name=_PROG, complete_var=_COMPLETE_VAR)
    typer.echo(f"{done} completion installed in {path}")
    typer.echo("Completion takes effect in a new shell.")
    return 0
