"""Interactive handover (attached to the terminal): ``handover run
--interactive`` runs the child attached to the terminal (a real pty here), the user answers
its follow-up prompt, and the results of every turn are written back to the handover file.
The model is the scripted replay server (a loopback server replaying ``rules``)."""

from __future__ import annotations

import json
import os
import pty
import select
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from _helpers import VALIDATOR_OK as OK
from _helpers import ProjectFactory
from personae.handover.create import build_handover, write_handover
from personae.handover.tool import HandoverToolArgs, HandoverToolResult

RULES = [
    {"when": {"role": "manager", "contains": "Break the user's task"},
     "output": {"subtasks": [{"description": "Answer the question"}]}},
    {"when": {"role": "worker", "contains": "What is the host"}, "text": "HOST-ANSWER localhost"},
    {"when": {"role": "worker"}, "text": "PORT-ANSWER 8081"},
    {"when": {"role": "validator"}, "output": OK},
    {"when": {"role": "manager", "contains": "HOST-ANSWER"}, "text": "FINAL-HOST: localhost"},
    {"when": {"role": "manager"}, "text": "FINAL-PORT: 8081"},
]  # fmt: skip


@pytest.fixture
def project(project_factory: ProjectFactory) -> Path:
    dev = "---\nname: dev\ndescription: Answers.\ntools: [read_file]\n---\nAnswer briefly.\n"
    return project_factory(
        {"dev": dev},
        {"scenario.yaml": yaml.safe_dump({"steps": [], "rules": RULES})},
    )


class _Terminal:
    """The parent side of a pty: what it showed so far (``seen``), read until a deadline."""

    def __init__(self, fd: int, deadline: float) -> None:
        self.fd = fd
        self.deadline = deadline
        self.seen = bytearray()

    def expect(self, needle: bytes, times: int = 1) -> None:
        """Read the terminal into ``seen`` until ``needle`` shows ``times`` times."""
        while self.seen.count(needle) < times:
            left = self.deadline - time.monotonic()
            shown = self.seen.decode(errors="replace")
            if left <= 0:
                pytest.fail(f"no {needle!r} on the terminal; it showed:\n{shown}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # EIO: the child side closed
                    chunk = b""
                if not chunk:
                    pytest.fail(f"terminal closed before {needle!r}:\n{shown}")
                self.seen += chunk

    def send(self, data: bytes) -> None:
        """Type ``data`` on the terminal."""
        os.write(self.fd, data)


@contextmanager
def _terminal(argv: list[str], cwd: Path, timeout: float = 120) -> Iterator[_Terminal]:
    """``argv`` (``argv[0]`` the program) run in ``cwd`` with a new pty as its stdin and
    stdout; yields the terminal. Afterwards the process is waited for and must have exited 0
    (the failure shows what the terminal showed)."""
    env = {**os.environ, "COLUMNS": "120", "TERM": "dumb"}
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdin/stdout are the pty
        try:
            os.chdir(cwd)
            os.execve(argv[0], argv, env)
        finally:
            os._exit(127)
    terminal = _Terminal(fd, time.monotonic() + timeout)
    try:
        yield terminal
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, terminal.seen.decode(errors="replace")


@pytest.mark.process  # a child attached to a real terminal
def test_handover_run_interactive_attaches_the_child_to_the_terminal(project: Path) -> None:
    created = write_handover(
        build_handover(
            source_persona="user", target_persona="dev", task="What is the port?", cwd=project
        ),
        cwd=project,
    )
    argv = [
        sys.executable, "-m", "personae", "handover", "run", str(created.path),
        "--interactive", "--model", f"scripted:{project / 'scenario.yaml'}", "--timeout", "120s",
    ]  # fmt: skip
    with _terminal(argv, project) as terminal:  # a personae CLI on the terminal
        terminal.expect(b"Follow-up")
        assert b"FINAL-PORT: 8081" in terminal.seen  # the first turn ran live on the terminal
        terminal.send(b"What is the host?\n")
        terminal.expect(b"FINAL-HOST: localhost")
        terminal.expect(b"Follow-up", times=2)
        terminal.send(b"\n")
        terminal.expect(b"success:")
    saved = json.loads(created.path.read_text())
    results = saved["results"]
    assert results["status"] == "success"
    assert "FINAL-PORT: 8081" in results["output"] and "FINAL-HOST: localhost" in results["output"]
    assert saved["target"]["interactive"] is False  # the flag chose the mode, not the file


@pytest.mark.process  # a child attached to a real terminal
def test_the_tool_interactive_flag_runs_the_target_on_the_terminal(project: Path) -> None:
    script = (
        "from pathlib import Path\n"
        "from personae.handover.child import ChildOptions\n"
        "from personae.handover.create import HandoverContent\n"
        "from personae.handover.tool import handover_to_persona\n"
        "r = handover_to_persona('dev', 'What is the port?', source_persona='user',\n"
        "    cwd=Path('.'), content=HandoverContent(interactive=True),\n"
        f"    child=ChildOptions(model='scripted:{project / 'scenario.yaml'}'))\n"
        "print('TOOL-RESULT', r.status, r.results['status'], flush=True)\n"
    )
    with _terminal([sys.executable, "-c", script], project) as terminal:
        terminal.expect(b"Follow-up")
        terminal.send(b"\n")
        terminal.expect(b"TOOL-RESULT success success")
    assert b"FINAL-PORT: 8081" in terminal.seen  # the target ran attached to the terminal
    assert b"TOOL-RESULT success success" in terminal.seen


def test_tool_arguments_and_results_use_the_handover_camel_case_names() -> None:
    camel = HandoverToolArgs.model_validate(
        {"targetPersona": "dev", "task": "t", "waitForResults": False, "interactive": True}
    )
    snake = HandoverToolArgs.model_validate(
        {"target_persona": "dev", "task": "t", "wait_for_results": False, "interactive": True}
    )
    assert camel == snake and camel.interactive and not camel.wait_for_results
    schema = HandoverToolArgs.model_json_schema()
    assert {"targetPersona", "task", "waitForResults", "interactive"} <= set(schema["properties"])
    wire = HandoverToolResult(
        success=True, handover_id="h1", context_path="/tmp/h.json", status="prepared"
    ).to_wire()
    assert {"success", "handoverId", "contextPath", "results", "message"} <= set(wire)
