"""A mistake inside a file, found before a run is stored, is usage: one line naming the
file, the field and the closest valid value, exit 2, and no run.

Every command that starts runs is covered (`run`, `run --context-from`, `chain run`,
`batch`, `handover run`, `handover create`), each on real files in a real project folder,
through the CLI's own entry point.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from personae.handover.create import build_handover, write_handover

Cli = Callable[..., subprocess.CompletedProcess[str]]
PERSONA = "---\nname: writer\ndescription: Writes.\n---\nWrite.\n"


@pytest.fixture
def project(tmp_path: Path, offline_home: Path) -> Path:
    """A project with one persona, ``writer``, and a scenario file beside it."""
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "writer.md").write_text(PERSONA, encoding="utf-8")
    (tmp_path / "one.yaml").write_text("steps:\n  - text: hi\n", encoding="utf-8")
    return root


def usage_line(done: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a command that must have exited 2 with nothing on stdout."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("personae: error: "), done.stderr
    assert done.stdout == ""
    return lines[0]


def no_runs(cli: Cli, project: Path) -> None:
    listed = cli("runs", "list", "--json", cwd=project)
    assert json.loads(listed.stdout) == []


def test_a_workflow_field_misspelt_or_naming_no_persona(cli: Cli, project: Path) -> None:
    flow = project / "flow.yaml"
    flow.write_text(
        "name: f\nsteps:\n  - {id: a, persona: writer, task: t}\n"
        "  - parallel:\n    - {id: b, persona: writer, task: t}\n"
        "    - {id: c, persona: writer, tsk: t}\n",
        encoding="utf-8",
    )
    line = usage_line(cli("chain", "run", str(flow), cwd=project, check=False))
    assert line == (
        f"personae: error: {flow}: steps.1.parallel.1.tsk: unknown field 'tsk'; did you mean "
        "'task'? (valid: data, files, id, inputs, insights, model, num_cpus, persona, profile, "
        "resources, retries, task, timeout)"
    )
    flow.write_text("name: f\nmodle: x\nsteps:\n  - {id: a, persona: writer, task: t}\n")
    line = usage_line(cli("chain", "run", str(flow), cwd=project, check=False))
    assert line.endswith(
        "modle: unknown field 'modle'; did you mean 'model'? "
        "(valid: defaults, description, model, name, steps)"
    )
    flow.write_text("name: f\nsteps:\n  - {id: a, persona: writer, task: t, model: 'opnai:x'}\n")
    line = usage_line(cli("chain", "run", str(flow), cwd=project, check=False))
    assert f"{flow}: step 'a' model: unknown model provider 'opnai'; did you mean" in line
    flow.write_text("name: f\nsteps:\n  - {id: a, persona: writr, task: t}\n")
    line = usage_line(cli("chain", "run", str(flow), cwd=project, check=False))
    assert f"{flow}: step 'a' persona: unknown persona 'writr'; did you mean 'writer'?" in line
    assert not (project / ".personae" / "chains").exists()  # no checkpoint either
    # --resume from a checkpoint that cannot be read: refused before the chain's run.
    flow.write_text("name: f\nsteps:\n  - {id: a, persona: writer, task: t}\n")
    checkpoint = project / ".personae/chains/f/checkpoint.json"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_text("{not json", encoding="utf-8")
    line = usage_line(cli("chain", "run", str(flow), "--resume", cwd=project, check=False))
    assert line.startswith(f"personae: error: {checkpoint}: unreadable checkpoint: ")
    no_runs(cli, project)


def test_a_task_line_misspelt_or_naming_no_persona(cli: Cli, project: Path) -> None:
    tasks = project / "tasks.jsonl"
    tasks.write_text('{"task": "t"}\n{"task": "t", "persna": "writer"}\n', encoding="utf-8")
    line = usage_line(cli("batch", str(tasks), cwd=project, check=False))
    assert line.startswith(f"personae: error: {tasks}:2: persna: unknown field 'persna'; ")
    assert "did you mean 'persona'?" in line
    tasks.write_text('{"id": "one", "task": "t", "persona": "writr"}\n', encoding="utf-8")
    line = usage_line(cli("batch", str(tasks), cwd=project, check=False))
    assert f"{tasks}: task 'one' persona: unknown persona 'writr'; did you mean 'writer'?" in line
    tasks.write_text('{"id": "two", "task": "t", "model": "opnai:gpt-4o"}\n', encoding="utf-8")
    line = usage_line(cli("batch", str(tasks), cwd=project, check=False))
    assert f"{tasks}: task 'two' model: unknown model provider 'opnai'; did you mean" in line
    line = usage_line(cli("batch", str(tasks), "--executor", "rey", cwd=project, check=False))
    assert "--executor: unknown executor 'rey'; did you mean 'ray'?" in line
    assert not (project / "tasks.results.jsonl").exists()
    no_runs(cli, project)


def test_a_persona_or_config_file_that_does_not_load(cli: Cli, project: Path) -> None:
    spec = f"scripted:{project.parent / 'one.yaml'}"
    broken = project / ".personae" / "personas" / "broken.md"
    broken.write_text("---\nname: broken\ndescription: x\nmax_steps: lots\n---\nhi\n")
    line = usage_line(
        cli("run", "hi", "--persona", "broken", "--model", spec, cwd=project, check=False)
    )
    assert line.startswith(f"personae: error: {broken}:4: ")
    config = project / ".personae" / "config.yaml"
    config.write_text("model: nonsense\n", encoding="utf-8")
    line = usage_line(cli("run", "hi", cwd=project, check=False))
    assert line.startswith(f"personae: error: {config}: model: ")
    no_runs(cli, project)


@pytest.mark.parametrize(
    "text, where",
    [("budget: [1\nfoo: 1\n", ":2: malformed YAML"), ("budgte: 10\n", ": budgte: unknown field")],
)
def test_a_config_mistake_is_usage_on_every_command_that_reads_it(
    cli: Cli, project: Path, text: str, where: str
) -> None:
    """The same config mistake is the same one line and exit 2 whichever command reads it
    (``context build`` once said exit 1 where ``run`` said 2)."""
    config = project / ".personae" / "config.yaml"
    config.write_text(text, encoding="utf-8")
    (project / "flow.yaml").write_text("name: f\nsteps:\n  - {id: a, persona: writer, task: t}\n")
    (project / "t.jsonl").write_text('{"id": "a", "persona": "writer", "task": "t"}\n')
    commands = [
        ("run", "hi"),
        ("context", "build", "--role", "worker"),
        ("context", "report", "--role", "worker"),
        ("chain", "run", "flow.yaml"),
        ("batch", "t.jsonl"),
        ("handover", "create", "--to", "writer", "--task", "t"),
    ]
    for args in commands:
        line = usage_line(cli(*args, cwd=project, check=False))
        assert line.startswith(f"personae: error: {config}{where}"), (args, line)
    no_runs(cli, project)
    assert not (project / ".personae" / "handovers").exists()
    # doctor reports it among its checks (a finding, exit 1), not as a crash
    doctor = cli("doctor", cwd=project, check=False)
    assert doctor.returncode == 1
    assert f"FAIL config: {config}" in doctor.stdout


def test_a_settings_mistake_is_usage_too(cli: Cli, project: Path) -> None:
    done = cli("context", "build", "--role", "worker", cwd=project, check=False,
               env={"PERSONAE_MODEL": "opnai:x"})  # fmt: skip
    assert "PERSONAE_MODEL: unknown model provider 'opnai'" in usage_line(done)


def test_a_handover_naming_no_persona(cli: Cli, project: Path) -> None:
    spec = f"scripted:{project.parent / 'one.yaml'}"
    h = build_handover(source_persona="user", target_persona="writr", task="Write", cwd=project)
    path = write_handover(h, cwd=project).path
    before = path.read_bytes()
    want = f"{path}: target.persona: unknown persona 'writr'; did you mean 'writer'?"
    line = usage_line(cli("handover", "run", str(path), "--model", spec, cwd=project, check=False))
    assert want in line and "attempt" not in line  # no child was started
    line = usage_line(
        cli(
            "run",
            "--context-from",
            str(path),
            "--non-interactive",
            "--model",
            spec,
            cwd=project,
            check=False,
        )
    )
    assert want in line
    line = usage_line(
        cli(
            "handover",
            "run",
            str(path),
            "--persona",
            "writter",
            "--model",
            spec,
            cwd=project,
            check=False,
        )
    )
    assert "--persona: unknown persona 'writter'; did you mean 'writer'?" in line
    assert path.read_bytes() == before  # no results written
    no_runs(cli, project)
    ledger = cli("handover", "ledger", "--json", cwd=project)
    assert ledger.returncode == 0 and "running" not in ledger.stdout  # no start recorded


def test_handover_create_mistakes_are_usage_and_an_unsafe_file_is_not(
    cli: Cli, project: Path
) -> None:
    line = usage_line(
        cli(
            "handover",
            "create",
            "--to",
            "writer",
            "--task",
            "t",
            "--data",
            "{no",
            cwd=project,
            check=False,
        )
    )
    assert "--data is not valid JSON" in line
    unsafe = cli("handover", "create", "--to", "writer", "--task", "t",
                 "--file", "/etc/passwd:data", cwd=project, check=False)  # fmt: skip
    assert unsafe.returncode == 1 and "outside the allowed roots" in unsafe.stderr
    assert not list((project / ".personae").glob("handovers/*.json"))


def test_outside_a_project_stays_exit_1(cli: Cli, tmp_path: Path, offline_home: Path) -> None:
    """Not a mistake in what was typed: the folder is in no project (nothing written)."""
    bare = tmp_path / "bare"
    bare.mkdir()
    flow = bare / "flow.yaml"
    flow.write_text("name: f\nsteps:\n  - {id: a, persona: writer, task: t}\n")
    done = cli("chain", "run", str(flow), cwd=bare, check=False)
    assert done.returncode == 1 and "no personae project" in done.stderr
    assert sorted(p.name for p in bare.iterdir()) == ["flow.yaml"]
