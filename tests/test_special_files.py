"""Special files (FIFOs, devices) given as input files: refused in one line, never a hang.

Every entry point that reads an input file is tried with a real FIFO that no
process ever writes to. A regression would block forever in ``open``; every case
runs in process under an alarm (the CLI as the console script runs it), so a
regression fails instead of hanging the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from _helpers import personae_cli
from personae.errors import PersonaeError

TIMEOUT = int(os.environ.get("PERSONAE_TEST_HANG_TIMEOUT", "90"))
"""Seconds before a CLI case counts as hung (generous: CI machines are shared)."""


class HungError(BaseException):
    """Raised by the alarm; not an OSError, so no ``except OSError`` can swallow it."""


@contextmanager
def no_hang(seconds: int = 20) -> Iterator[None]:
    """Fail (HungError) instead of blocking forever in an ``open`` of a FIFO."""

    def fail(_signum: int, _frame: Any) -> None:
        raise HungError("blocked on a special file")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def personae(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``personae ARGS`` in process (``COLUMNS=200`` from conftest), failing with HungError
    instead of blocking forever."""
    with no_hang(TIMEOUT):
        return personae_cli(*args, cwd=cwd)


def refused_in_one_line(result: subprocess.CompletedProcess[str], path: Path) -> str:
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    assert line.startswith("personae: error: "), line
    assert str(path) in line or path.name in line, line
    assert "Traceback" not in result.stderr
    return line


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / ".personae").mkdir(parents=True)
    return root


def handover_doc(workdir: Path, paths: list[str]) -> dict[str, Any]:
    return {
        "version": "1.0.0",
        "timestamp": "2026-01-01T00:00:00Z",
        "handoverId": "h-1",
        "source": {"persona": "a", "sessionId": "", "workingDirectory": str(workdir)},
        "target": {"persona": "b", "task": "t"},
        "artifacts": {"files": [{"path": p, "type": "data"} for p in paths]},
    }


@pytest.mark.parametrize(
    "command",
    [
        ("handover", "validate"),
        ("handover", "show"),
        ("handover", "run", "--retries", "0"),
        ("chain", "run"),
    ],
)
def test_fifo_as_the_input_file_of_a_command(project: Path, command: tuple[str, ...]) -> None:
    fifo = project / "h.json"
    os.mkfifo(fifo)
    line = refused_in_one_line(personae(*command, str(fifo), cwd=project), fifo)
    assert "FIFO" in line


def test_fifo_as_context_from_of_run(project: Path) -> None:
    fifo = project / "h.yaml"
    os.mkfifo(fifo)
    result = personae("run", "--context-from", str(fifo), "--non-interactive", cwd=project)
    assert "FIFO" in refused_in_one_line(result, fifo)


def test_a_character_device_is_not_read_as_a_handover(project: Path) -> None:
    link = project / "zero.json"
    link.symlink_to("/dev/zero")
    result = personae("handover", "validate", str(link), cwd=project)
    assert "character device" in refused_in_one_line(result, link)


def test_fifo_as_the_project_config(project: Path) -> None:
    fifo = project / ".personae" / "config.yaml"
    os.mkfifo(fifo)
    result = personae("handover", "create", "--to", "researcher", "--task", "t", cwd=project)
    assert "FIFO" in refused_in_one_line(result, fifo)
    assert not (project / ".personae" / "handovers").exists()


def test_fifo_as_profiles_yaml(project: Path) -> None:
    fifo = project / ".personae" / "profiles.yaml"
    os.mkfifo(fifo)
    result = personae("context", "roles", cwd=project)
    assert "FIFO" in refused_in_one_line(result, fifo)


def test_show_exits_non_zero_on_a_file_validate_refuses(project: Path) -> None:
    bad = project / "h.json"
    bad.write_text(json.dumps(handover_doc(project, ["/etc/passwd"])))
    validate = personae("handover", "validate", str(bad), cwd=project)
    show = personae("handover", "show", str(bad), cwd=project)
    assert validate.returncode != 0
    assert show.returncode == validate.returncode
    assert show.stderr.strip() == validate.stderr.strip()
    assert "outside the allowed roots" in refused_in_one_line(show, bad)
    assert show.stdout == ""


def test_show_refuses_an_unsafe_environment_like_validate(project: Path) -> None:
    doc = handover_doc(project, [])
    doc["source"]["environment"] = {"LD_PRELOAD": "/tmp/evil.so"}
    bad = project / "h.json"
    bad.write_text(json.dumps(doc))
    validate = personae("handover", "validate", str(bad), cwd=project)
    show = personae("handover", "show", str(bad), cwd=project)
    assert validate.returncode != 0 and show.returncode == validate.returncode
    assert "LD_PRELOAD" in refused_in_one_line(show, bad)


# --- entry points called directly, not through the CLI ----------------------------


def test_fifo_as_a_scenario_file(tmp_path: Path) -> None:
    from personae.models.scenario import load_scenario

    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)
    with no_hang(), pytest.raises(PersonaeError, match="FIFO") as info:
        load_scenario(fifo)
    assert str(fifo) in str(info.value)


def test_fifo_as_a_workflow_file(tmp_path: Path) -> None:
    from personae.workflow.spec import load_workflow

    fifo = tmp_path / "chain.yaml"
    os.mkfifo(fifo)
    with no_hang(), pytest.raises(PersonaeError, match="FIFO"):
        load_workflow(fifo)


def test_fifo_in_the_memory_folder_and_as_the_mind_prompt(tmp_path: Path) -> None:
    from personae.mind.server import MindPaths, create_server

    memory = tmp_path / "memory"
    memory.mkdir()
    (memory / "ok.md").write_text("---\nname: ok\ndescription: fine\ntype: note\n---\nbody\n")
    os.mkfifo(memory / "pipe.md")
    os.mkfifo(tmp_path / "mind.md")
    paths = MindPaths(memory_dir=memory, prompt=tmp_path / "mind.md", store=tmp_path / "s.db")
    server, _ = create_server(paths)
    seen: dict[str, Any] = {}

    async def main() -> None:
        async with Client(server) as client:
            seen["read"] = await client.call_tool("read_memory_file", {"name": "pipe.md"})
            seen["list"] = await client.call_tool("list_memory_files", {})
            seen["boot"] = await client.call_tool("bootstrap_session", {})

    with no_hang():
        anyio.run(main)
    assert seen["read"].is_error and "FIFO" in seen["read"].content[0].text
    names = [f["name"] for f in seen["list"].structured_content["files"]]
    assert names == ["ok.md"]
    boot = seen["boot"].structured_content
    assert boot["mind_contract_available"] is False
    assert "FIFO" in json.dumps(boot)
