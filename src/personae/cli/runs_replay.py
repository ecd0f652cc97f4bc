"""``personae runs replay|compare|diff``: re-run a stored run, lay two side by side, and
show what changed in an assembled context between two calls."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from personae.cli._options import JsonOpt
from personae.cli._root import project_root
from personae.cli.runs import runs_app
from personae.errors import CommandLineError, UsageError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from personae.store.runs import RunStore

    _Found = TypeVar("_Found", bound=BaseModel)

__all__ = ["parse_call_refs"]


def _width() -> int:
    """Output width: the terminal's (at most 100), else 80."""
    if sys.stdout.isatty():
        return max(40, min(100, shutil.get_terminal_size((80, 24)).columns))
    return 80


def _runs() -> RunStore:
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.cli.runs import _store

    store: RunStore = _store(project_root())
    store.reconcile()
    return store


def _print_result(
    find: Callable[[RunStore], _Found], render: Callable[[_Found], str], as_json: bool
) -> None:
    """Find something in the project's runs and print it as JSON or as text; a run or
    call that is not there is a one-line usage error."""
    try:
        found = find(_runs())
    except UsageError as exc:
        raise CommandLineError.of(exc) from None
    typer.echo(found.model_dump_json(indent=2) if as_json else render(found))


@runs_app.command("replay")
def replay(
    run_id: Annotated[str, typer.Argument(help="Run to replay (a unique prefix works).")],
    model: Annotated[
        str | None, typer.Option(help="Model for the live calls (default: the run's).")
    ] = None,
    persona_prompt: Annotated[
        Path | None,
        typer.Option(
            "--persona-prompt",
            metavar="FILE",
            help="File whose text replaces the persona's prompt.",
        ),
    ] = None,
    from_call: Annotated[
        int,
        typer.Option(
            "--from",
            metavar="CALL",
            help="First call asked of a model; earlier ones come from the record.",
        ),
    ] = 1,
    as_json: JsonOpt = False,
) -> None:
    """Re-run a stored run as a new run linked to it: same task, persona, handover and
    project files; calls before --from answered from the record, the rest live."""
    # local import: CLI start-up (the runtime loads only when a replay runs)
    import asyncio

    from personae.team.replay import ReplayRequest, check_replay, replay_run

    request = ReplayRequest(run_id=run_id, model=model, persona_prompt=persona_prompt,
                            from_call=from_call)  # fmt: skip
    root = project_root()
    try:
        check_replay(root, request)  # every bad input is caught before anything is stored
    except UsageError as exc:
        raise CommandLineError.of(exc) from None
    result = asyncio.run(replay_run(root, request))
    link = result.link
    if as_json:
        payload = {
            "run_id": result.run_id,
            "replay_of": link.of,
            "status": result.status,
            "final_text": result.final_text,
            "replay": link.model_dump(mode="json"),
        }
        typer.echo(json.dumps(payload, indent=2))  # fmt: skip
    else:
        live = link.model or "the run's model"
        lines = [
            f"run {result.run_id} ({result.status}) replays {link.of}",
            f"  {link.recorded_calls} call(s) answered from the record (before call "
            f"{link.from_call});",
            f"  live from call {link.from_call} against {live}"
            + (f" with the persona prompt of {link.persona_prompt}" if link.persona_prompt
               else ""),
        ]  # fmt: skip
        if link.diverged_at is not None:
            lines.append(f"  diverged: call {link.diverged_at} was made by another role than "
                         "in the original run")  # fmt: skip
        lines += [f"  project: {d}" for d in link.project_drift]
        lines += [f"answer: {result.final_text.strip() or '-'}",
                  f"compare: personae runs compare {link.of} {result.run_id}"]  # fmt: skip
        typer.echo("\n".join(lines))
    code = result.status.exit_code
    if code:
        raise typer.Exit(code)


@runs_app.command("compare")
def compare(
    run_a: Annotated[str, typer.Argument(help="First run (a unique prefix works).")],
    run_b: Annotated[str, typer.Argument(help="Second run.")],
    as_json: JsonOpt = False,
) -> None:
    """Two runs side by side, call by call: role, model, answer, tool calls, verdict,
    completion signal, tokens and time."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.team.compare import compare_runs, render_comparison

    _print_result(lambda runs: compare_runs(runs, run_a, run_b),
                  lambda found: render_comparison(found, width=_width()), as_json)  # fmt: skip


_DIFF_FORMS = "give RUN CALL_A CALL_B (two calls of one run) or RUN_A:CALL RUN_B:CALL"


def parse_call_refs(refs: list[str]) -> tuple[tuple[str, int], tuple[str, int]]:
    """``[RUN, CALL_A, CALL_B]`` or ``[RUN_A:CALL, RUN_B:CALL]`` -> two ``(run, call)``;
    anything else is a :class:`CommandLineError` naming both forms."""

    def number(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise CommandLineError(f"call {text!r} is not a call number (1, 2, ...); "
                                   + _DIFF_FORMS, field="CALL")  # fmt: skip
        return int(text)

    if len(refs) == 3:
        return (refs[0], number(refs[1])), (refs[0], number(refs[2]))
    if len(refs) == 2 and all(":" in r for r in refs):
        (run_a, _, call_a), (run_b, _, call_b) = (r.rpartition(":") for r in refs)
        if run_a and run_b:
            return (run_a, number(call_a)), (run_b, number(call_b))
    raise CommandLineError(_DIFF_FORMS, field="runs diff")


@runs_app.command("diff")
def diff(
    refs: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN CALL_A CALL_B | RUN_A:CALL RUN_B:CALL",
            help="Two calls of one run, or a call of each of two runs (unique prefixes work).",
        ),
    ],
    full: Annotated[bool, typer.Option(help="Every changed line, however many.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """What changed in the assembled context between two model calls, per section: added,
    removed, cut, summarized or changed, with token deltas and the changed lines."""
    # local import: CLI start-up (only the command that runs loads what it needs)
    from personae.context.diff import diff_calls, render_diff

    a, b = parse_call_refs(refs)
    _print_result(lambda runs: diff_calls(runs, a, b),
                  lambda found: render_diff(found, width=_width(), max_lines=None if full else 40),
                  as_json)  # fmt: skip
