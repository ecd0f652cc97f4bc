"""Shared parts of the tests: the CLI as a child process, a one-persona project whose team
run reads ``config.yaml`` on the scripted replay server, a team turn on the in-process
scripted function model (scenario step builders down to whole attempts and one-subtask
turns, the team-loop sample project) and the event and request helpers that read it, a
cast that must load cleanly, async bodies run under a deadline, the built-in tools on a
workspace, and a file writer.

The fixtures that hand these out (``cli``, ``project_factory`` ...) are in ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pytest
import yaml

from personae.models import ModelResolver, Scenario, scripted_function_model
from personae.models.scenario import ROLE_MARKER
from personae.persona import Cast
from personae.team.events import Event
from personae.team.result import RunResult
from personae.team.session import RunOptions, run_turn
from personae.tools import ToolLimits, ToolRegistry, ToolSubset, Workspace

T = TypeVar("T")

ASYNC_TIMEOUT = 120.0
"""Seconds an async test body (:func:`run_async`) may run before it is cancelled and the
test fails; the whole test has pytest-timeout's ``timeout`` (pyproject.toml) on top."""

VALIDATOR_OK: dict[str, Any] = {
    "approved": True,
    "requirements_met": True,
    "issues": [],
    "completion_signal": {"confidence": "high", "progress_made": True},
}
"""A validator verdict that approves the worker's report."""

DEV_PERSONA = """---
name: dev
description: Works on the sample project.
tools: [read_file, grep]
---
You are dev.
"""


def run_personae(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m personae ARGS`` as a child process and return it, whatever its exit.

    ``env`` replaces the environment (``None``: this process's own); ``stdin``, e.g.
    ``subprocess.DEVNULL`` (``None``: inherited).
    """
    return subprocess.run(
        [sys.executable, "-m", "personae", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdin=stdin,
    )


def invoke_personae(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``personae ARGS`` in this process, as the console script does
    (:func:`personae.cli.app.run_cli`), and return what a child process would have given:
    exit code, stdout and stderr.

    For the call only: the working directory is ``cwd``, the environment this process's
    minus ``drop`` plus ``env``, standard input empty and standard output and error captured
    (click's ``CliRunner`` isolation, which is what ``typer.testing`` uses); model requests
    are allowed (a child process has no test guard: the runs go to the scripted loopback
    server). Everything is restored afterwards. Bounded by pytest-timeout, not a timeout of
    its own.
    """
    from click.testing import CliRunner  # typer's CLI test runner
    from pydantic_ai import models

    from personae.cli.app import run_cli

    overrides: dict[str, str | None] = dict.fromkeys(drop)
    overrides.update(env or {})
    before_env = dict(os.environ)
    before_cwd = os.getcwd()
    allowed = models.ALLOW_MODEL_REQUESTS
    runner = CliRunner()
    code = 1
    try:
        with runner.isolation(input="", env=overrides) as (out, err, _):
            if cwd is not None:
                os.chdir(cwd)
            models.ALLOW_MODEL_REQUESTS = True
            try:
                code = run_cli([str(a) for a in args])
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
            stdout, stderr = out.getvalue(), err.getvalue()
    finally:
        models.ALLOW_MODEL_REQUESTS = allowed
        os.chdir(before_cwd)
        os.environ.clear()
        os.environ.update(before_env)
    return subprocess.CompletedProcess(
        ["personae", *args],
        code,
        stdout.decode("utf-8", "replace"),
        stderr.decode("utf-8", "replace"),
    )


def plan(*descriptions: str) -> dict[str, Any]:
    """A manager step answering with one subtask per description (each with one requirement)."""
    subtasks = [{"description": d, "requirements": [f"{d} is done"]} for d in descriptions]
    return {"when": {"role": "manager"}, "output": {"subtasks": subtasks}}


def work(text: str) -> dict[str, Any]:
    """A worker step answering ``text``."""
    return {"when": {"role": "worker"}, "text": text}


def tool(name: str, **args: Any) -> dict[str, Any]:
    """A worker step calling tool ``name`` with ``args``."""
    return {"when": {"role": "worker"}, "tool_calls": [{"name": name, "args": args}]}


def read(path: str) -> dict[str, Any]:
    """A worker step calling ``read_file`` on ``path``."""
    return tool("read_file", path=path)


def verdict(
    approved: bool,
    *,
    blocker: str | None = None,
    progress: bool = True,
    confidence: str = "high",
    strategy: str | None = None,
    issues: list[str] | None = None,
) -> dict[str, Any]:
    """A validator step: approved or not, with its completion signal."""
    return {
        "when": {"role": "validator"},
        "output": {
            "approved": approved,
            "requirements_met": approved,
            "issues": issues if issues is not None else ([] if approved else ["not good enough"]),
            "next_action": "continue" if approved else "fix",
            "completion_signal": {
                "confidence": confidence,
                "progress_made": progress,
                "blocker_type": blocker,
                "suggested_strategy": strategy,
            },
        },
    }


def attempt(
    calls: dict[str, Any] | Sequence[dict[str, Any]],
    report: str,
    judged: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One worker attempt of a subtask: the tool call step(s) ``calls``, the worker's report
    ``report`` and the validator's step ``judged`` (``None`` where the loop decides the
    attempt in code, without a validator call)."""
    steps = [calls] if isinstance(calls, dict) else list(calls)
    steps.append(work(report))
    return steps if judged is None else [*steps, judged]


def synth(text: str = "Summary of validated work.") -> dict[str, Any]:
    """The manager's closing (synthesis) step."""
    return {"when": {"role": "manager"}, "text": text}


def one_subtask(
    description: str,
    *attempts: Sequence[dict[str, Any]],
    answer: str | None = "Summary of validated work.",
) -> list[dict[str, Any]]:
    """The scenario steps of a one-subtask turn: the manager's plan (:func:`plan`) for
    ``description``, the steps of each attempt (:func:`attempt`) in order, and the manager's
    synthesis ``answer`` (``None``: no synthesis step)."""
    steps = [plan(description)]
    for steps_of_attempt in attempts:
        steps += steps_of_attempt
    return steps if answer is None else [*steps, synth(answer)]


def one_read_steps(path: str, *, subtask: str, report: str, answer: str) -> list[dict[str, Any]]:
    """Scenario steps of one subtask: the worker reads ``path`` and reports ``report``, the
    validator approves, the manager answers ``answer``."""
    return [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": subtask}]}},
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "read_file", "args": {"path": path}}]},
        {"when": {"role": "worker"}, "text": report},
        {"when": {"role": "validator"}, "output": VALIDATOR_OK},
        {"when": {"role": "manager"}, "text": answer},
    ]  # fmt: skip


def read_config_scenario(
    answer: str, *, description: str, report: str = "config.yaml: port 8081"
) -> dict[str, Any]:
    """One subtask: the worker reads ``config.yaml`` and reports, the validator approves,
    the manager answers ``answer``."""
    steps = one_read_steps("config.yaml", subtask="Read config", report=report, answer=answer)
    return {"description": description, "steps": steps}


def build_project(
    root: Path,
    personas: Mapping[str, str] = {},
    files: Mapping[str, str] = {},
    *,
    folder: str = ".personae/personas",
) -> Path:
    """``root`` with each persona written to ``FOLDER/NAME.md`` and each file to
    ``root/PATH``; returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in personas.items():
        write(root / folder / f"{name}.md", text)
    for rel, text in files.items():
        write(root / rel, text)
    return root


class ProjectFactory(Protocol):
    """Makes a project folder under the test's ``tmp_path`` (the ``project_factory`` fixture)."""

    def __call__(
        self,
        personas: Mapping[str, str] = ...,
        files: Mapping[str, str] = ...,
        *,
        name: str = ...,
        folder: str = ...,
        scenarios: Mapping[str, Any] = ...,
    ) -> Path: ...


def write_scenarios(folder: Path, scenarios: Mapping[str, Any]) -> None:
    """Each scenario written as YAML to ``folder/NAME.yaml`` (``scripted:`` model specs)."""
    for name, plan in scenarios.items():
        write(folder / f"{name}.yaml", yaml.safe_dump(plan))


def dev_project(
    tmp_path: Path, scenarios: dict[str, dict[str, Any]], *, persona: str = DEV_PERSONA
) -> Path:
    """``tmp_path/proj`` with the ``dev`` persona and a ``config.yaml`` (port 8081); each
    scenario is written to ``tmp_path/NAME.yaml``."""
    root = build_project(tmp_path / "proj", {"dev": persona}, {"config.yaml": "port: 8081\n"})
    write_scenarios(tmp_path, scenarios)
    return root


def run_async(coro: Coroutine[Any, Any, T], *, timeout: float = ASYNC_TIMEOUT) -> T:
    """``asyncio.run(coro)`` under a deadline: after ``timeout`` seconds the body is
    cancelled (its ``finally`` blocks and context managers run, so child processes and
    servers are closed) and the test fails saying so, instead of hanging the suite.

    Exceptions of the body, a ``TimeoutError`` of its own included, pass through unchanged.
    """
    expired = False

    async def bounded() -> T:
        nonlocal expired
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await coro
        finally:
            expired = deadline.expired()

    try:
        return asyncio.run(bounded())
    except TimeoutError:
        if not expired:
            raise
        pytest.fail(f"async test body still running after {timeout:g} s (cancelled)", pytrace=False)


def write(path: Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path``, making its folders; return ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def clean_cast(root: Path, rel: str, text: str) -> Cast:
    """Write ``text`` to ``root/rel`` and load the project's cast, which must load without
    errors (the test fails listing them otherwise); returns the cast."""
    write(root / rel, text)
    cast = Cast.load(root)
    assert cast.errors == [], [str(e) for e in cast.errors]
    return cast


def child_env(env: Mapping[str, str] | None = None, *, drop: Iterable[str] = ()) -> dict[str, str]:
    """This process's environment minus the names in ``drop``, plus ``env``."""
    dropped = set(drop)
    full = {k: v for k, v in os.environ.items() if k not in dropped}
    full.update(env or {})
    return full


def personae_cli(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    drop: Iterable[str] = (),
    timeout: float = 120,
    check: bool = False,
    stdin: int | None = None,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``personae ARGS`` with this process's environment (fixed width, no colour: see
    ``conftest.py``) minus the names in ``drop`` plus ``env``, in ``cwd``.

    In this process by default (:func:`invoke_personae`, as the console script runs it);
    with ``process`` as a ``python -m personae`` child (:func:`run_personae`), for tests
    whose point is the process boundary (signals, exit paths, what a child inherits).
    With ``check`` a non-zero exit fails the test with the command's stderr.
    """
    if process:
        full = child_env(env, drop=drop)
        done = run_personae(*args, cwd=cwd, env=full, timeout=timeout, stdin=stdin)
    else:
        done = invoke_personae(*args, cwd=cwd, env=env, drop=drop)
    if check:
        assert done.returncode == 0, done.stderr
    return done


TEAM_PERSONA = """---
name: dev
description: Works on the sample project.
tools: [read_file, grep, list_dir, write_file]
max_steps: 6
---
You are dev. Use your tools.
"""
"""The ``dev`` persona of the team-loop tests: the four file tools, six steps."""


def team_project(root: Path, persona: str = TEAM_PERSONA) -> Path:
    """``root`` with ``persona`` as ``dev``, a ``config.yaml`` (port 8081, host localhost)
    and a ``notes.md`` (release on Friday): the team-loop tests' sample project."""
    files = {"config.yaml": "port: 8081\nhost: localhost\n", "notes.md": "Release on Friday.\n"}
    return build_project(root, {"dev": persona}, files)


def run_team(
    root: Path,
    steps: list[dict[str, Any]],
    task: str = "Give me the port and the release day.",
    **options: Any,
) -> tuple[RunResult[Any], Any]:
    """:func:`run_scenario` on the sample project's default task."""
    return run_scenario(root, steps, task, **options)


def run_scenario(
    root: Path,
    steps: list[dict[str, Any]],
    task: str,
    *,
    persona: str = "dev",
    rules: list[dict[str, Any]] | None = None,
    listeners: Sequence[Callable[[Event], None]] = (),
    model_name: str = "scripted:test",
    **options: Any,
) -> tuple[RunResult[Any], Any]:
    """One team turn on ``root`` with the in-process scripted function model replaying
    ``steps`` (and ``rules``); returns the outcome and the scripted player.

    ``options`` go to :class:`RunOptions` (``include_git_log`` is off unless given). Every
    step must be used: a step left over fails the test.
    """
    model = scripted_function_model(Scenario.model_validate({"steps": steps, "rules": rules or []}))
    options.setdefault("include_git_log", False)
    run_options = RunOptions(root=root, persona=persona, **options)
    resolver = ModelResolver.using(model, model_name)
    outcome = run_async(run_turn(task, run_options, listeners=listeners, resolver=resolver))
    assert model.player.remaining_steps == 0, "scenario steps left unanswered"
    return outcome, model.player


def events_of(outcome: RunResult[Any], kind: str) -> list[Event]:
    """The events of ``kind`` (its string value) the run emitted, in order."""
    return [e for e in outcome.events if e.kind.value == kind]


def requests_with(player: Any, marker: str) -> list[dict[str, Any]]:
    """The scripted player's requests with ``marker`` in any message."""
    return [
        r for r in player.requests if any(marker in str(m.get("content")) for m in r["messages"])
    ]


def role_requests(player: Any, role: str) -> list[dict[str, Any]]:
    """The scripted player's requests made for ``role`` (manager, worker, validator ...)."""
    return requests_with(player, ROLE_MARKER.format(role=role))


def tool_results(request: dict[str, Any]) -> list[str]:
    """The tool results a model request carried, in order."""
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]


def builtin_subset(root: Path, names: Sequence[str] | None = None, **limits: Any) -> ToolSubset:
    """The built-in tools on a workspace at ``root`` with ``limits``, narrowed to ``names``
    (``None``: all of them)."""
    registry = ToolRegistry.builtin(Workspace(root), limits=ToolLimits(**limits))
    return registry.subset() if names is None else registry.subset(list(names))


def call_tool(subset: ToolSubset, name: str, **args: Any) -> str:
    """Dispatch one call of tool ``name`` with ``args`` through ``subset`` (under
    :func:`run_async`'s deadline) and return its result."""
    return run_async(subset.dispatch(name, args))


def wait_until(
    check: Callable[[], Any],
    timeout: float = 10.0,
    *,
    interval: float = 0.1,
    what: str = "condition",
) -> None:
    """Poll ``check()`` every ``interval`` seconds until it is true; the test fails after
    ``timeout`` seconds, naming ``what`` it waited for."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    pytest.fail(f"{what} not met within {timeout:g} s")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def mind_http_server(*args: str, cwd: Path, wait: float = 60) -> Iterator[str]:
    """A real ``personae serve ARGS --http`` process on a free loopback port; yields its MCP
    URL once the port accepts connections (a server that exits first fails the test with
    its stderr) and terminates it afterwards."""
    port = free_port()
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(
            [sys.executable, "-m", "personae", "serve", *args, "--http", "--port", str(port)],
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
        try:
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if proc.poll() is not None:
                    errors.seek(0)
                    stderr = errors.read().decode(errors="replace")
                    pytest.fail(f"personae serve --http exited before listening:\n{stderr}")
                time.sleep(0.2)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=20)


def run_local_server_turn(
    root: Path,
    base_url: str,
    raw_requests: Sequence[tuple[str, dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
    **options: Any,
) -> tuple[RunResult[Any], ModelResolver, list[dict[str, Any]]]:
    """One team turn of ``openai:smollm2`` at ``base_url`` (as a user runs a local server:
    OPENAI_BASE_URL), persona ``dev``; returns the outcome, the (closed) resolver and the
    chat requests the server got, the window probe left out."""
    monkeypatch.setenv("OPENAI_BASE_URL", base_url)
    resolver = ModelResolver(default="openai:smollm2")
    run_options = RunOptions(root=root, persona="dev", include_git_log=False, **options)
    try:
        outcome = run_async(run_turn("What port does the service use?", run_options,
                                     resolver=resolver))  # fmt: skip
    finally:
        resolver.close()
    chat = [b for route, b in raw_requests if route.endswith("/chat/completions")]
    return outcome, resolver, [b for b in chat if b.get("max_tokens") != 1]


HISTORY_TEXTS = [
    "The quick brown fox reviewed the report. " * 6,
    "日本語のテキストと中文内容混合在一起。" * 4,
    "2026-11-22T10:00:01Z ERROR worker[42]: reset\n" * 40,
    '{"id":"a1","items":[{"sku":"X-1","qty":3}]}\n' * 30,
    "def handler(event):\n    return {'q': event['q']}  // x\n/usr/bin/env\n" * 20,
]
"""Message texts of generated agent histories: prose, CJK, a log, JSON lines, code."""


def with_oversized_turn(msgs: list[Any], output: str, counter: Any) -> Any:
    """``msgs`` followed by a latest turn whose one tool output is ``output`` (a user
    message, an assistant call, its result), and those messages prepared for fitting:
    the exchanges a fit shrinks when ``output`` is over the budget."""
    from personae.context import history as history_mod
    from personae.context.messages import ChatMessage, ChatToolCall
    from personae.context.window import exchanges_of

    msgs.append(ChatMessage("user", "now fix it", seq=len(msgs) + 1))
    msgs.append(
        ChatMessage("assistant", "reading", seq=len(msgs) + 1,
                    tool_calls=(ChatToolCall("big", "read", "{}"),))
    )  # fmt: skip
    msgs.append(ChatMessage("tool", output, tool_call_id="big", seq=len(msgs) + 1))
    return exchanges_of(msgs, history_mod.MessageCosts(counter, frozenset()))[0]
