"""Mistakes found before a run is stored are usage: one line, exit 2, no run.

``personae run``, ``chain run``, ``batch`` and ``handover run``/``create`` check their flags,
arguments and files (a workflow's step, a task line, a handover, a persona file) before
they store anything. A mistake there is a :class:`~personae.errors.UsageError` naming the
file, field and closest valid value; inside :func:`before_run` it becomes a
:class:`~personae.errors.CommandLineError`, which the CLI prints as one line and exit 2,
the code the README gives usage errors.

Two refusals keep exit 1, because nothing the user typed is wrong: a folder that is in no
project (:class:`~personae.cli._root.NotInProjectError`) and a handover that breaks a
safety rule (:class:`~personae.security.policy.HandoverSecurityError`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from personae.cli._root import NotInProjectError
from personae.errors import CommandLineError, UsageError

__all__ = ["before_run"]


@contextmanager
def before_run() -> Iterator[None]:
    """Turn a :class:`UsageError` raised in the body into a :class:`CommandLineError`
    (exit 2), except the two refusals above."""
    try:
        yield
    except CommandLineError:
        raise
    except NotInProjectError:
        raise
    except UsageError as exc:
        # local import: CLI start-up (the handover safety rules load only when one is read)
        from personae.security.policy import HandoverSecurityError

        if isinstance(exc, HandoverSecurityError):
            raise
        raise CommandLineError.of(exc) from None
