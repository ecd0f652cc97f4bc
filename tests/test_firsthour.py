"""A newcomer's first hour: clean output on a terminal, no third-party noise."""

from __future__ import annotations

import itertools
import json
import os
import pty
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from _helpers import child_env, personae_cli
from conftest import flat
from personae.tools._walk import glob_regex


def run_on_terminal(args: list[str], cwd: Path, *, columns: int = 80, timeout: float = 120) -> str:
    """Run ``python -m personae ARGS`` with stdin, stdout and stderr on a pseudo-terminal.

    CI and PYTEST_VERSION are removed from the child's environment: third-party
    libraries hide their banners under them, so the check could not fail otherwise.
    """
    chunks = terminal_reads(args, cwd, columns=columns, timeout=timeout)
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))


def terminal_reads(
    args: list[str], cwd: Path, *, columns: int = 80, timeout: float = 120
) -> list[bytes]:
    """What each read of the terminal got while ``python -m personae ARGS`` ran on it."""
    drop = ("CI", "PYTEST_VERSION", "NO_COLOR", "_TYPER_FORCE_DISABLE_TERMINAL")
    env = child_env({"COLUMNS": str(columns), "TERM": "xterm-256color"}, drop=drop)
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "personae", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=env,
        close_fds=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.wait(timeout=timeout) == 0, b"".join(chunks).decode(errors="replace")[-2000:]
    return chunks


@pytest.mark.process
def test_demo_on_a_terminal_shows_no_third_party_banner(tmp_path: Path) -> None:
    out = run_on_terminal(["demo"], tmp_path)
    assert "Stored as run run-" in out  # the demo ran to its end on the terminal
    for noise in ("Logfire", "pydantic-ai v", "PYDANTIC_AI_NO_BANNER", "observability"):
        assert noise not in out, out


@pytest.mark.parametrize(
    ("pattern", "name", "matches"),
    [
        ("[--0]", ".", True),
        ("[a&&b]", "&", True),
        ("[a~~b]", "c", False),
        ("[a||b]", "|", True),
        ("[a-c]", "b", True),
        ("[!a-c]", "b", False),
        ("[]]", "]", True),
        ("[^]", "^", True),
    ],
)
def test_glob_classes_compile_without_future_warnings(
    pattern: str, name: str, matches: bool
) -> None:
    glob_regex.cache_clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Python's "possible set difference" is a FutureWarning
        assert bool(glob_regex(pattern).match(name)) is matches


def test_reversed_glob_range_is_an_error_not_a_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(re.error):
            glob_regex("[a--b]")  # the range a..'-' is reversed


DEMO_SCENARIO = Path(__file__).resolve().parents[1] / "src/personae/examples/demo/scenario.yaml"


def personae(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """``python -m personae ARGS`` in ``cwd`` (no terminal), environment plus ``env``."""
    return personae_cli(*args, cwd=cwd, env=env, drop=["PERSONAE_MODEL"], timeout=timeout)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder after ``personae init``, with a nested subfolder ``src/deep``."""
    root = tmp_path / "shop"
    done = personae("init", str(root), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (root / "src" / "deep").mkdir(parents=True)
    return root


def test_commands_find_the_project_from_a_subfolder(project: Path) -> None:
    deep = project / "src" / "deep"
    listed = personae("personas", "list", "--json", cwd=deep)
    assert listed.returncode == 0, listed.stderr
    assert "analyst" in {p["name"] for p in json.loads(listed.stdout)}
    roles = personae("context", "build", "--role", "worker", "--persona", "analyst", cwd=deep)
    assert roles.returncode == 0, roles.stderr
    # The same commands outside any project see no project.
    outside = personae("personas", "list", "--json", cwd=project.parent)
    assert outside.returncode == 0 and json.loads(outside.stdout) == []


def test_help_says_how_the_project_is_found(tmp_path: Path) -> None:
    shown = personae("--help", cwd=tmp_path, env={"COLUMNS": "80"})
    assert "nearest folder holding .personae/" in flat(shown.stdout)


def test_doctor_right_after_init_fails_only_on_the_missing_model(project: Path) -> None:
    done = personae("doctor", cwd=project / "src" / "deep")
    lines = done.stdout.splitlines()
    assert done.returncode == 1
    assert [line for line in lines if line.startswith("FAIL")] == [
        "FAIL model: no model configured: `personae run` needs one"
    ]
    assert any(f"found from {project / 'src' / 'deep'}" in line for line in lines), lines
    assert any(line.startswith("OK   store:") for line in lines)
    # No host files use personae: the host checks are one line, not ten failures.
    assert [line for line in lines if "hosts" in line] == [
        "OK   hosts: no host files use personae here (optional; not checked)"
    ]


def test_doctor_asks_the_model_server(project: Path) -> None:
    from personae.models.scripted import ScriptedServer

    with ScriptedServer(DEMO_SCENARIO) as server:
        url = server.base_url
        env = {"PERSONAE_MODEL": "openai:some-model", "OPENAI_BASE_URL": url}
        done = personae("doctor", "--json", cwd=project, env=env)
    report = json.loads(done.stdout)
    levels = {i["name"]: (i["level"], i["detail"]) for i in report["items"]}
    assert done.returncode == 0, done.stdout
    assert levels["provider reachable"] == ("OK", f"{url}/models answered 200")
    assert levels["API key"][0] == "OK"  # a local server needs no key


def test_doctor_names_the_url_of_a_closed_port(project: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    env = {"PERSONAE_MODEL": "openai:some-model", "OPENAI_BASE_URL": url}
    done = personae("doctor", cwd=project, env=env)
    assert done.returncode == 1
    line = next(x for x in done.stdout.splitlines() if x.startswith("FAIL provider reachable"))
    assert f"cannot connect to {url}/models" in line


def test_doctor_gives_up_on_a_silent_server_within_its_timeout(project: Path) -> None:
    import socket
    import time

    with socket.socket() as sock:  # accepts connections (backlog) and never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        env = {"PERSONAE_MODEL": "openai:m", "OPENAI_BASE_URL": url}
        started = time.monotonic()
        done = personae("doctor", "--timeout", "0.5", cwd=project, env=env)
        took = time.monotonic() - started
    assert done.returncode == 1
    assert f"FAIL provider reachable: no answer from {url}/models in 0.5 s" in done.stdout
    assert took < 30


def test_doctor_key_missing_for_a_hosted_provider(project: Path) -> None:
    env = {"PERSONAE_MODEL": "anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY": ""}
    done = personae("doctor", "--no-probe", cwd=project, env=env)
    assert "FAIL API key: ANTHROPIC_API_KEY is not set" in done.stdout
    assert "fix: export ANTHROPIC_API_KEY=" in done.stdout


def test_doctor_checks_the_model_a_persona_runs_with(project: Path) -> None:
    writer = (
        "---\nname: writer\ndescription: Writes.\ntools: [read_file]\nmodel: sonnet\n---\nHi.\n"
    )
    (project / ".personae" / "personas" / "writer.md").write_text(writer, encoding="utf-8")
    env = {"PERSONAE_MODEL": "openai:gpt-4o", "OPENAI_API_KEY": "sk-test", "ANTHROPIC_API_KEY": ""}
    done = personae("doctor", "--no-probe", "--json", cwd=project, env=env)
    assert done.returncode == 1, done.stdout
    levels = {i["name"]: (i["level"], i["detail"]) for i in json.loads(done.stdout)["items"]}
    assert levels["API key"] == ("OK", "OPENAI_API_KEY is set")  # the default model's
    own = "anthropic:claude-sonnet-4-5"
    assert levels["model of writer"] == ("OK", f"{own} (the persona's own model)")
    assert levels[f"API key ({own})"] == ("FAIL", "ANTHROPIC_API_KEY is not set")


def test_doctor_starts_and_asks_the_scripted_model_server(project: Path) -> None:
    env = {"PERSONAE_MODEL": f"scripted:{DEMO_SCENARIO}"}
    done = personae("doctor", cwd=project, env=env)
    assert done.returncode == 0, done.stdout
    assert "OK   scenario:" in done.stdout
    assert "OK   scripted replay server: http://127.0.0.1:" in done.stdout


def test_doctor_store_that_cannot_be_written_fails(project: Path) -> None:
    (project / ".personae" / "state.db").mkdir()  # not a database file
    done = personae("doctor", "--no-probe", cwd=project)
    assert "FAIL store:" in done.stdout and "state.db is not writable" in done.stdout


DEMO_TASK = "Give me the port the service listens on and the setup steps."


@pytest.fixture
def demo_project(tmp_path: Path) -> Path:
    """The demo's sample project, kept (its maintainer persona fits the demo scenario)."""
    target = tmp_path / "weather"
    done = personae("demo", "--keep", str(target), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return target


def _start_run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    full = {k: v for k, v in os.environ.items() if k != "PERSONAE_MODEL"}
    full.update(env or {})
    return subprocess.Popen(
        [sys.executable, "-m", "personae", "run", *args],
        cwd=cwd,
        env=full,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _show(cwd: Path, run_id: str) -> dict[str, object]:
    shown = personae("runs", "show", run_id, "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    run: dict[str, object] = json.loads(shown.stdout)["run"]
    return run


@pytest.mark.process
def test_a_run_killed_in_its_first_second_is_stored_and_shows_crashed(demo_project: Path) -> None:
    import signal

    proc = _start_run(
        demo_project, DEMO_TASK, "--persona", "maintainer", "--json",
        "--model", f"scripted:{DEMO_SCENARIO}",
    )  # fmt: skip
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # the id, as a spawner sees it
    os.kill(proc.pid, signal.SIGKILL)
    try:
        run = _show(demo_project, first["run_id"])
        # Not reaped yet (a zombie): still not alive.
        assert run["status"] == "crashed", run
    finally:
        proc.wait(timeout=30)
        proc.stdout.close()
        assert proc.stderr is not None
        proc.stderr.close()
    run = _show(demo_project, first["run_id"])
    assert run["status"] == "crashed"
    assert run["pid"] == proc.pid
    assert f"process {proc.pid} ended without finishing the run" in str(run["error"])
    listed = personae("runs", "list", "--json", cwd=demo_project)
    rows = {r["id"]: r["status"] for r in json.loads(listed.stdout)}
    assert rows[first["run_id"]] == "crashed"
    text = personae("runs", "show", first["run_id"], cwd=demo_project).stdout
    assert "reason: crashed: process" in text and f"pid {proc.pid}" in text


def test_a_connection_error_names_the_url_and_runs_show_says_why(project: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    env = {"PERSONAE_MODEL": "openai:m", "OPENAI_BASE_URL": url}
    proc = personae("run", "Total March revenue", "--persona", "analyst", cwd=project, env=env)
    assert proc.returncode == 1
    assert f"(connecting to {url}/chat/completions)" in proc.stderr
    assert "Traceback" not in proc.stderr
    run_id = proc.stdout.split()[1]  # "Run <id> started; ..."
    run = _show(project / "src" / "deep", run_id)  # from a subfolder, too
    assert run["status"] == "failed"
    assert f"connecting to {url}/chat/completions" in str(run["error"])
    text = personae("runs", "show", run_id, cwd=project).stdout
    assert f"reason: run {run_id} failed" in text


def test_a_run_without_a_model_is_one_line_and_no_run(project: Path) -> None:
    proc = personae("run", "Total March revenue", cwd=project)
    assert proc.returncode == 2 and proc.stdout == ""  # found before the run: usage
    assert proc.stderr.startswith("personae: error: no model configured")
    assert len(proc.stderr.strip().splitlines()) == 1
    listed = personae("runs", "list", "--json", cwd=project)
    assert json.loads(listed.stdout) == []  # a mistake is not a run


def _closed_reader(proc: subprocess.Popen[str], lines: int) -> tuple[int, str, list[str]]:
    """Read ``lines`` lines, then close the pipe as ``| head`` does; (exit code, stderr, lines)."""
    assert proc.stdout is not None and proc.stderr is not None
    got = [proc.stdout.readline() for _ in range(lines)]
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.wait(timeout=120), err, got


@pytest.mark.process
def test_run_piped_into_head_ends_cancelled_without_an_error(demo_project: Path) -> None:
    proc = _start_run(
        demo_project, DEMO_TASK, "--persona", "maintainer", "--model", f"scripted:{DEMO_SCENARIO}"
    )
    code, err, got = _closed_reader(proc, 2)
    assert code == 141, err  # 128 + SIGPIPE, what a shell shows for `| head`
    assert err == ""
    run = _show(demo_project, got[0].split()[1])
    assert run["status"] == "cancelled" and run["error"] == "output closed (broken pipe)"


@pytest.mark.process
def test_demo_json_piped_into_head_prints_no_broken_pipe_error(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "personae", "demo", "--json"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    code, err, got = _closed_reader(proc, 1)
    assert json.loads(got[0])["kind"] == "start"
    assert code == 141 and err == ""


def test_reconcile_by_heartbeat_and_reused_pids(tmp_path: Path) -> None:
    from datetime import UTC, datetime, timedelta

    from personae.store.db import Store
    from personae.store.runs import STALE_SECONDS, RunStore

    with Store(tmp_path / "state.db") as store:
        runs = RunStore(store)
        mine = runs.create(task="t", model="m", heartbeat=False)
        reused = runs.create(task="t", model="m", heartbeat=False)
        remote = runs.create(task="t", model="m", heartbeat=False)
        fresh_remote = runs.create(task="t", model="m", heartbeat=False)
        old = (datetime.now(UTC) - timedelta(seconds=STALE_SECONDS + 5)).isoformat()
        with store.transaction() as conn:
            conn.execute("UPDATE runs SET pid_started = -1 WHERE id = ?", (reused,))
            conn.execute(
                "UPDATE runs SET host='elsewhere', heartbeat_at=? WHERE id=?", (old, remote)
            )
            conn.execute("UPDATE runs SET host='elsewhere' WHERE id=?", (fresh_remote,))
        assert sorted(runs.reconcile()) == sorted([reused, remote])
        status = {r.id: r.status for r in runs.list_runs()}
        assert status == {
            mine: "running",
            reused: "crashed",
            remote: "crashed",
            fresh_remote: "running",
        }
        assert "no heartbeat for" in str(runs.get(remote).error)


def _command_paths() -> list[list[str]]:
    import typer.main

    from personae.cli.app import app

    root = typer.main.get_command(app)
    paths: list[list[str]] = [[]]

    def walk(group: object, prefix: list[str]) -> None:
        for name, cmd in getattr(group, "commands", {}).items():
            paths.append([*prefix, name])
            walk(cmd, [*prefix, name])

    walk(root, [])
    return paths


@pytest.mark.parametrize("columns", ["80", "200"])
def test_no_help_is_cut(
    columns: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import typer.rich_utils

    from personae.cli.app import run_cli

    monkeypatch.setenv("COLUMNS", columns)
    monkeypatch.setattr(typer.rich_utils, "MAX_WIDTH", int(columns))  # read at import
    cut = []
    for path in _command_paths():
        assert run_cli([*path, "--help"]) == 0
        out = capsys.readouterr().out
        assert "Usage: personae" in out
        assert max(len(line) for line in out.splitlines()) == int(columns)
        cut += [f"{' '.join(path)}: {line.strip()}" for line in out.splitlines() if "…" in line]
    assert cut == []


def test_shell_completion_installs_and_completes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {"HOME": str(home), "SHELL": "/bin/bash"}
    done = personae("--install-completion", "bash", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    script = home / ".bash_completions" / "personae.sh"
    assert "_PERSONAE_COMPLETE" in script.read_text(encoding="utf-8")
    assert str(script) in (home / ".bashrc").read_text(encoding="utf-8")
    # What bash asks when the user types `personae ru<TAB>`.
    env.update(_PERSONAE_COMPLETE="complete_bash", COMP_WORDS="personae ru", COMP_CWORD="1")
    asked = personae(cwd=tmp_path, env=env)
    assert asked.stdout.split() == ["run", "runs"]


def test_shell_completion_without_a_shell_among_the_ancestors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under a process with no shell above it (a Dockerfile RUN line, a CI agent) the
    shell named wins, else ``$SHELL``'s; one that cannot be told is one line, exit 2,
    and nothing is written."""
    import shellingham

    from personae.cli.app import run_cli

    def no_shell() -> tuple[str, str]:
        raise shellingham.ShellDetectionFailure()

    monkeypatch.setattr(shellingham, "detect_shell", no_shell)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("SHELL", raising=False)
    assert run_cli(["--install-completion"]) == 2
    assert capsys.readouterr().err == (
        "personae: error: --install-completion: cannot tell your shell;"
        " name it, e.g. --install-completion bash\n"
    )
    assert run_cli(["--install-completion", "tcsh"]) == 2
    assert "unknown shell 'tcsh'; one of bash, zsh, fish" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written
    monkeypatch.setenv("SHELL", "/usr/bin/zsh")
    assert run_cli(["--show-completion"]) == 0
    assert capsys.readouterr().out.startswith("#compdef personae")
    assert run_cli(["--install-completion", "fish"]) == 0
    script = tmp_path / ".config" / "fish" / "completions" / "personae.fish"
    assert "_PERSONAE_COMPLETE" in script.read_text(encoding="utf-8")
    assert "fish completion installed in" in capsys.readouterr().out


def test_runs_show_puts_our_token_count_next_to_the_reported_one(demo_project: Path) -> None:
    done = personae(
        "run", DEMO_TASK, "--persona", "maintainer", "--model", f"scripted:{DEMO_SCENARIO}",
        cwd=demo_project,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_id = done.stdout.split()[1]
    shown = json.loads(personae("runs", "show", run_id, "--json", cwd=demo_project).stdout)
    calls = shown["model_calls"]
    assert calls
    for call in calls:
        usage = call["usage"]
        assert usage["input_tokens"] > 0 and usage["counted_input_tokens"] > 0
        assert usage["counter_exact"] is False  # no public tokenizer for the scripted server
    text = personae("runs", "show", run_id, cwd=demo_project).stdout
    for call in calls:  # one figure (the server's real count of what it got) and our drift
        usage = call["usage"]
        reported = usage["input_tokens"]
        drift = 100 * (usage["counted_input_tokens"] - reported) / reported
        assert (
            f"input tokens: {usage['input_tokens']:,} (provider; ours {drift:+.1f}%, "
            f"{usage['counter']}); output {usage['output_tokens']}"
        ) in text
        # the server counts with a real tokenizer (o200k); ours is the generic estimate,
        # 25% safety margin on top, so it stays above: the drift is the margin and the
        # estimate's own error, no longer a character ratio of the JSON (+60..+330%)
        assert 0 < drift < 100, usage
    # The budget report does not call an estimate exact.
    assert "(exact count)" not in text and "(estimate, " in text


def test_our_request_count_covers_every_part_and_tool() -> None:
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.tools import ToolDefinition

    from personae.team._request_tokens import MESSAGE_FRAMING, count_request
    from personae.tokens.exact import exact_counter

    counter = exact_counter("o200k_base")
    tool = ToolDefinition(name="read_file", description="Read a file.",
                          parameters_json_schema={"type": "object"})  # fmt: skip
    messages = [
        ModelRequest(parts=[SystemPromptPart("You are terse."), UserPromptPart("Port?")]),
        ModelResponse(parts=[ToolCallPart("read_file", {"path": "a.yaml"}, "c1")]),
        ModelRequest(parts=[ToolReturnPart("read_file", "port: 8081", "c1")]),
        ModelResponse(parts=[TextPart("8081")]),
    ]
    params = ModelRequestParameters(function_tools=[tool])
    texts = [
        "You are terse.", "Port?", 'read_file {"path":"a.yaml"}', "port: 8081", "8081",
        'read_file Read a file. {"type": "object"}',
    ]  # fmt: skip
    expected = sum(counter.count(t) for t in texts) + MESSAGE_FRAMING * 5
    assert count_request(messages, params, counter) == expected


def test_scaffold_state_files_name_the_sample_csv_columns(project: Path) -> None:
    header = (project / ".personae/samples/sales.csv").read_text(encoding="utf-8").splitlines()[0]
    state = (project / ".personae/project/STATE.md").read_text(encoding="utf-8")
    assert ", ".join(header.split(",")) in state
    step = next((project / ".personae/project/goals").rglob("STEP.md")).read_text(encoding="utf-8")
    named = set(re.findall(r"`([a-z_]+)`", step)) - {"reports"}
    assert named <= set(header.split(",")), named


@pytest.mark.process
def test_serve_on_a_terminal_says_what_it_is_and_stops_at_the_first_ctrl_c(
    project: Path,
) -> None:
    import select
    import signal
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "personae", "serve"],
        stdin=slave,
        stdout=subprocess.DEVNULL,
        stderr=slave,
        cwd=project,
        close_fds=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while b"Ctrl-C stops it" not in seen and time.monotonic() < deadline:
            if select.select([master], [], [], 1)[0]:
                seen += os.read(master, 4096)
        assert b"personae serve: MCP server on stdin/stdout" in seen, seen
        time.sleep(0.5)  # the server is reading stdin now
        os.kill(proc.pid, signal.SIGINT)  # once, and no Enter
        assert proc.wait(timeout=10) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


def test_json_on_init_handover_validate_and_ledger(tmp_path: Path) -> None:
    created = personae("init", "shop", "--json", cwd=tmp_path)
    listed = json.loads(created.stdout)
    assert ".personae/personas/analyst.md" in listed["created"] and listed["kept"] == []
    again = json.loads(personae("init", "shop", "--json", cwd=tmp_path).stdout)
    assert again["created"] == [] and len(again["unchanged"]) == len(listed["created"])
    shop = tmp_path / "shop"
    made = personae(
        "handover", "create", "--to", "writer", "--task", "Write the March report",
        "--out", "h.json", cwd=shop,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    checked = json.loads(personae("handover", "validate", "h.json", "--json", cwd=shop).stdout)
    assert checked["ok"] is True and checked["target"] == "writer"
    (shop / "src").mkdir()
    ledger = json.loads(personae("handover", "ledger", "--json", cwd=shop / "src").stdout)
    assert [e["handover_id"] for e in ledger] == [checked["handover_id"]]
    one = json.loads(
        personae("handover", "ledger", checked["handover_id"], "--json", cwd=shop).stdout
    )
    assert one["target_persona"] == "writer" and one["events"]


def test_the_readme_first_session_runs_offline_from_a_subfolder(project: Path) -> None:
    scenario = project / ".personae/scenarios/march-revenue.yaml"
    done = personae(
        "run", "Total March revenue", "--persona", "analyst", "--model", f"scripted:{scenario}",
        cwd=project / "src" / "deep",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "March 2026 revenue was 2,190" in done.stdout
    rows = [r.split(",") for r in (project / ".personae/samples/sales.csv").read_text().split()]
    assert sum(int(r[4]) for r in rows[1:] if r[0] == "2026-03") == 2190  # the scenario is right
    listed = json.loads(personae("runs", "list", "--json", cwd=project).stdout)
    assert [(r["status"], r["persona"]) for r in listed] == [("done", "analyst")]


@pytest.mark.parametrize("columns", [80, 200])
@pytest.mark.process
def test_runs_list_on_a_terminal_cuts_nothing(demo_project: Path, columns: int) -> None:
    (stored,) = json.loads(personae("runs", "list", "--json", cwd=demo_project).stdout)
    out = run_on_terminal(["runs", "list"], demo_project, columns=columns)
    assert "…" not in out
    assert stored["id"] in out and "done" in out  # ids are never wrapped
    if columns >= 120:  # the table: a long model path wraps inside its cell, whole
        cells = [line.split("│") for line in out.splitlines() if line.startswith("│")]
        assert "".join(c[5].strip() for c in cells) == stored["model"]
    else:  # two lines a run
        assert f"(model {stored['model']})" in out


ANSWER = "March 2026 revenue was 2,190, summed from the four 2026-03 rows of"


def _streaming_scenario(project: Path) -> Path:
    """The README's scenario with pauses between the pieces of the streamed final answer."""
    scenario = project / ".personae/scenarios/march-revenue.yaml"
    text = scenario.read_text(encoding="utf-8")
    assert text.rstrip().endswith('.personae/samples/sales.csv."')  # the final answer comes last
    slow = project / "slow.yaml"
    slow.write_text(text.rstrip() + "\n    stream_pause: 0.15\n", encoding="utf-8")
    return slow


@pytest.mark.process
def test_the_final_answer_streams_on_a_terminal(project: Path) -> None:
    slow = _streaming_scenario(project)
    reads = terminal_reads(
        ["run", "Total March revenue", "--persona", "analyst", "--model", f"scripted:{slow}"],
        project,
    )
    texts = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", r.decode(errors="replace")) for r in reads]
    out = "".join(texts)
    assert out.count(ANSWER) == 1, out[-2000:]
    # The answer's beginning was on the terminal before its end was written.
    start = out.index(ANSWER)
    ends = list(itertools.accumulate(len(t) for t in texts))  # where each read ended in out
    first = next(i for i, end in enumerate(ends) if end > start)
    last = next(i for i, end in enumerate(ends) if end >= start + len(ANSWER))
    assert last > first, texts[first]
    assert "status: done" in out[start:] and "usage:" in out[start:]


def test_json_emits_the_answer_in_pieces_before_the_final_event(project: Path) -> None:
    slow = _streaming_scenario(project)
    done = personae("run", "Total March revenue", "--persona", "analyst",
                    "--model", f"scripted:{slow}", "--json", cwd=project)  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    kinds = [e["kind"] for e in events]
    deltas = [e for e in events if e["kind"] == "answer_delta"]
    assert len(deltas) > 1 and kinds[-1] == "final"
    assert kinds.index("answer_delta") > kinds.index("validation")
    assert all(set(e["data"]) == {"text"} for e in deltas)
    assert "".join(e["data"]["text"] for e in deltas).strip() == events[-1]["message"]
    shown = json.loads(personae("runs", "show", events[0]["run_id"], "--json", cwd=project).stdout)
    stored = [e["kind"] for e in shown["events"]]
    assert "answer_delta" not in stored and stored[-1] == "final"
    assert shown["events"][-1]["message"] == events[-1]["message"]
