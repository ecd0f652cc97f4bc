"""QA regressions: user mistakes through the public CLI give one clear line, no traceback.

Most tests call ``personae.cli.app.run_cli(argv)`` (the function the console
script runs) in process; the ones about the process edge (environment,
Ctrl-C, the ``python -m personae`` entry) spawn a real subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from _helpers import run_personae
from conftest import flat
from personae.cli.app import run_cli

DEMO = Path(__file__).resolve().parents[1] / "src" / "personae" / "examples" / "demo"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run the CLI in process; (exit code, stdout, stderr)."""
    code = run_cli(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    """The stderr of a failed command: exactly one ``personae: error:`` line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("personae: error: "), err
    assert "Traceback" not in err
    return lines[0]


def spawn(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("PERSONAE_")}
    full.update(env or {})
    return run_personae(*args, cwd=cwd, env=full, timeout=120, stdin=subprocess.DEVNULL)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> Path:
    """An initialised example project as the working directory."""
    root = tmp_path / "proj"
    assert run_cli(["init", str(root)]) == 0
    monkeypatch.chdir(root)
    return root


# --- settings from the environment ------------------------------------------------


@pytest.mark.parametrize(
    ("var", "value", "needle"),
    [
        ("PERSONAE_BUDGET_SHARE", "2", "less than or equal to 1"),
        ("PERSONAE_BUDGET_SHARE", "abc", "valid number"),
        ("PERSONAE_MAX_RETRIES", "-1", "greater than or equal to 0"),
        ("PERSONAE_HANDOVER_TIMEOUT", "0", "greater than 0"),
        ("PERSONAE_MODEL", "nonsense", "must look like provider:name"),
        ("PERSONAE_MODEL", "foo:bar", "unknown model provider 'foo'"),
    ],
)
def test_bad_environment_value_names_the_variable(  # noqa: PLR0917 (pytest parameters)
    project: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    var: str,
    value: str,
    needle: str,
) -> None:
    monkeypatch.setenv(var, value)
    code, out, err = cli(capsys, "context", "report", "--role", "worker")
    line = one_error_line(err)
    assert code == 2  # a settings mistake is usage on every command, as in `run`
    assert f"{var}: " in line
    assert needle in line
    assert out == ""


@pytest.mark.process
def test_bad_environment_in_a_real_process_is_one_line(project: Path) -> None:
    proc = spawn("run", "hello", cwd=project, env={"PERSONAE_BUDGET_SHARE": "2"})
    assert proc.returncode == 2  # found before the run is stored: usage
    assert one_error_line(proc.stderr).startswith("personae: error: PERSONAE_BUDGET_SHARE: ")
    assert not (project / ".personae" / "state.db").exists()  # failed before touching the store


def test_personae_model_error_names_the_variable_not_the_flag(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERSONAE_MODEL", "nonsense")
    code, _, err = cli(capsys, "run", "hello")
    line = one_error_line(err)
    assert code == 2
    assert "PERSONAE_MODEL: " in line
    assert "--model" not in line


def test_blank_personae_model_means_not_configured(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PERSONAE_MODEL", "  ")
    code, _, err = cli(capsys, "run", "hello")
    assert code == 2
    assert "no model configured" in one_error_line(err)


@pytest.mark.parametrize(
    ("config", "field", "needle"),
    [
        ("model: nonsense\n", "model: ", "must look like provider:name"),
        ("commands: {enabled: true, timeout: -1}\n", "commands.timeout: ", "greater than 0"),
        ("commands: {max_output: -3}\n", "commands.max_output: ", "greater than or equal"),
    ],
)
def test_bad_project_config_names_file_and_field(
    project: Path, capsys: pytest.CaptureFixture[str], config: str, field: str, needle: str
) -> None:
    path = project / ".personae" / "config.yaml"
    path.write_text(config, encoding="utf-8")
    # a config mistake is usage (exit 2) whichever command reads the config
    for args in (("context", "build", "--role", "worker"), ("run", "hello")):
        code, _, err = cli(capsys, *args)
        line = one_error_line(err)
        assert code == 2
        assert f"{path}: {field}" in line
        assert needle in line


# --- folders and files named on the command line ---------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("personas", "list"),
        ("personas", "check"),
        ("personas", "show", "analyst"),
        ("context", "build", "--role", "worker"),
        ("context", "roles"),
        ("hosts", "check"),
        ("hosts", "render"),
        ("doctor", "--no-probe"),
    ],
)
def test_missing_root_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path, args: tuple[str, ...]
) -> None:
    missing = tmp_path / "no-such-project"
    code, out, err = cli(capsys, *args, "--root", str(missing))
    assert code == 2
    assert "Invalid value for '--root'" in flat(err)
    assert "does not exist" in flat(err)
    assert "Traceback" not in err
    assert out == ""
    assert not missing.exists()


@pytest.mark.parametrize("args", [("context", "roles"), ("hosts", "check"), ("doctor",)])
def test_root_that_is_a_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path, args: tuple[str, ...]
) -> None:
    file = tmp_path / "plain.txt"
    file.write_text("x", encoding="utf-8")
    code, _, err = cli(capsys, *args, "--root", str(file))
    assert code == 2
    said = flat(err)  # Typer's error panel wraps at the output width: check what it says
    assert "Invalid value for '--root'" in said
    assert "is a file" in said


def test_handover_schema_out_in_missing_folder_is_written_atomically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    target = tmp_path / "new" / "dir" / "schema.json"
    code, _, _ = cli(capsys, "handover", "schema", "--out", str(target))
    assert code == 0
    assert json.loads(target.read_text(encoding="utf-8"))["title"]
    assert [p.name for p in target.parent.iterdir()] == ["schema.json"]  # no temp left


def test_handover_schema_out_unwritable_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    code, out, err = cli(capsys, "handover", "schema", "--out", str(blocker / "s.json"))
    assert code == 1
    assert str(blocker) in one_error_line(err)
    assert out == ""


@pytest.mark.process
def test_os_error_from_a_command_is_one_line_not_a_traceback(
    tmp_path: Path, isolated_home: Path
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    proc = spawn("demo", "--keep", str(blocker), cwd=tmp_path)
    assert proc.returncode == 1
    assert one_error_line(proc.stderr) == f"personae: error: {blocker}: --keep: not a folder"


# --- the store ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "list"),
        ("handover", "ledger"),
        ("handover", "create", "--to", "researcher", "--task", "t"),
        ("context", "build", "--role", "worker", "--session", "s1"),
    ],
)
def test_corrupt_state_db_is_one_line(
    project: Path, capsys: pytest.CaptureFixture[str], args: tuple[str, ...]
) -> None:
    db = project / ".personae" / "state.db"
    db.write_bytes(b"this is not an sqlite database at all, just text" * 20)
    code, _, err = cli(capsys, *args)
    line = one_error_line(err)
    assert code == 1
    assert f"{db}: cannot open store: file is not a database" in line
    left = [p for p in (project / ".personae").glob("handovers/*") if p.suffix != ".lock"]
    assert left == []  # nothing half-written (filelock's empty .lock files may stay)


@pytest.mark.process
def test_store_path_under_a_file_is_one_line(tmp_path: Path, isolated_home: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    proc = spawn("serve", "--store", str(blocker / "x.db"), cwd=tmp_path)
    assert proc.returncode == 1
    line = one_error_line(proc.stderr)
    assert line == f"personae: error: {blocker / 'x.db'}: cannot open store: {blocker}: File exists"


def test_ambiguous_run_prefix_says_so(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from personae.store.db import Store

    with Store(project / ".personae" / "state.db") as store, store.transaction() as conn:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
        for run_id in ("run-a1", "run-a2"):
            values = {c: "x" for c in columns} | {"id": run_id}
            marks = ", ".join("?" for _ in values)
            conn.execute(
                f"INSERT INTO runs ({', '.join(values)}) VALUES ({marks})",
                list(values.values()),
            )
    code, _, err = cli(capsys, "runs", "show", "run-a")
    line = one_error_line(err)
    assert code == 1
    assert "'run-a' is ambiguous: 2 runs match" in line
    assert "run-a1" in line and "run-a2" in line


# --- handover flags ---------------------------------------------------------------------


@pytest.mark.parametrize(("flag", "value"), [("--to", "-rf"), ("--from", "a b")])
def test_handover_create_bad_persona_name_names_the_flag(
    project: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    args = {"--to": "researcher", "--from": "user"} | {flag: value}
    code, out, err = cli(
        capsys, "handover", "create", "--task", "t", "--to", args["--to"], "--from", args["--from"]
    )
    assert code == 2
    assert one_error_line(err).startswith(f"personae: error: {flag}: bad persona name ")
    assert out == ""
    assert not (project / ".personae" / "handovers").exists()


@pytest.mark.parametrize("timeout", ["0", "-1"])
def test_handover_run_refuses_a_non_positive_timeout(
    project: Path, capsys: pytest.CaptureFixture[str], timeout: str
) -> None:
    code, out, _ = cli(capsys, "handover", "create", "--to", "researcher", "--task", "t")
    assert code == 0
    path = Path(out.strip())
    before = path.read_bytes()
    code, _, err = cli(capsys, "handover", "run", str(path), "--timeout", timeout)
    assert code == 2
    assert "--timeout" in err
    assert path.read_bytes() == before  # nothing was run or written


# --- file permissions of what we write ------------------------------------------------


def test_init_and_hosts_write_readable_files_and_keep_modes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    claude = root / "CLAUDE.md"
    claude.write_text("# my notes\n", encoding="utf-8")
    claude.chmod(0o664)
    assert cli(capsys, "init", str(root))[0] == 0
    assert cli(capsys, "hosts", "render", "--write", "--root", str(root))[0] == 0
    assert stat.S_IMODE(claude.stat().st_mode) == 0o664  # merged, mode kept
    assert claude.read_text(encoding="utf-8").startswith("# my notes\n")
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((root / "AGENTS.md").stat().st_mode) == 0o644
    directive = root / ".personae" / "directive.md"
    assert stat.S_IMODE(directive.stat().st_mode) == 0o666 & ~umask


# --- Ctrl-C ------------------------------------------------------------------------------


@pytest.mark.process
def test_interrupt_mid_run_prints_one_line_and_exits_130(tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "weather"
    shutil.copytree(DEMO / "project", root)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERSONAE_")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "personae",
            "run",
            "port?",
            "--persona",
            "maintainer",
            "--json",
            "--model",
            f"scripted:{DEMO / 'scenario.yaml'}",
        ],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A test run started in the background inherits SIGINT ignored; Ctrl-C needs the default.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # interrupt once the plan is stored: the run is under way
        if json.loads(line)["kind"] == "plan":
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the scripted run finished before the interrupt arrived")
    assert proc.returncode == 130
    assert err.strip() == "personae: interrupted"
    with sqlite3.connect(root / ".personae" / "state.db") as conn:
        statuses = [r[0] for r in conn.execute("SELECT status FROM runs")]
    assert statuses == ["cancelled"]


# --- chain and serve flags ---------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "status"])
def test_chain_state_dir_that_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path, command: str
) -> None:
    workflow = tmp_path / "wf.yaml"
    workflow.write_text("name: x\nsteps:\n  - {id: a, persona: p, task: t}\n", encoding="utf-8")
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    code, out, err = cli(capsys, "chain", command, str(workflow), "--state-dir", str(blocker))
    assert code == {"run": 2, "status": 1}[command]  # `chain run`: usage, before any run
    assert one_error_line(err) == f"personae: error: {blocker}: --state-dir: not a folder"
    assert out == ""


@pytest.mark.process
def test_serve_http_on_a_taken_port_is_one_line(tmp_path: Path, isolated_home: Path) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        proc = spawn("serve", "--http", "--port", str(port), cwd=tmp_path)
    assert proc.returncode == 1
    line = one_error_line(proc.stderr)
    assert line.startswith(f"personae: error: --port: cannot listen on 127.0.0.1:{port}: ")
    assert proc.stdout == ""


def test_init_where_dot_personae_is_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    (tmp_path / ".personae").write_text("not a folder", encoding="utf-8")
    code, out, err = cli(capsys, "init", str(tmp_path))
    assert code == 1
    assert one_error_line(err) == (
        f"personae: error: {tmp_path / '.personae'}: exists but is not a folder; move it away first"
    )
    assert out == ""
    assert (tmp_path / ".personae").read_text(encoding="utf-8") == "not a folder"


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (("--task", "   "), "--task: must not be empty"),
        (("--task", "x" * 20_001), "--task: String should have at most 20000 characters"),
        (("--task", "t", "--insight", "y" * 4_001), "--insight: String should have at most 4000"),
    ],
)
def test_handover_create_bad_text_names_the_flag(
    project: Path, capsys: pytest.CaptureFixture[str], extra: tuple[str, ...], expected: str
) -> None:
    code, out, err = cli(capsys, "handover", "create", "--to", "researcher", *extra)
    assert code == 2
    assert one_error_line(err).startswith(f"personae: error: {expected}")
    assert out == ""
    assert not (project / ".personae" / "handovers").exists()


def test_version_flag(capsys: pytest.CaptureFixture[str]) -> None:
    from personae import __version__

    code, out, err = cli(capsys, "--version")
    assert code == 0
    assert out == f"personae {__version__}\n"
    assert err == ""


def test_hosts_commands_on_a_non_utf8_instruction_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    (tmp_path / ".personae").mkdir()
    (tmp_path / "CLAUDE.md").write_bytes(b"\xff\xfe not text")
    code, out, err = cli(capsys, "hosts", "render", "--write", "--root", str(tmp_path))
    assert code == 1
    assert one_error_line(err) == "personae: error: CLAUDE.md: not UTF-8 text (byte 0)"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".personae", "CLAUDE.md"]  # nothing new
    code, out, err = cli(capsys, "hosts", "check", "--root", str(tmp_path))
    assert code == 1
    assert "FAIL CLAUDE.md: CLAUDE.md: not UTF-8 text (byte 0)" in out
    assert "Traceback" not in err


def test_non_utf8_config_and_scenario_are_one_line(
    project: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = project / ".personae" / "config.yaml"
    config.write_bytes(b"\xff\xfe model: x")
    code, _, err = cli(capsys, "context", "build", "--role", "worker")
    assert code == 2  # a config mistake: usage
    assert one_error_line(err) == f"personae: error: {config}: not UTF-8 text (byte 0)"
    config.unlink()
    scenario = tmp_path / "scenario.yaml"
    scenario.write_bytes(b"\xff\xfe steps: []")
    code, _, err = cli(capsys, "run", "hello", "--model", f"scripted:{scenario}")
    assert code == 2
    assert one_error_line(err).endswith(f"{scenario}: not UTF-8 text (byte 0)")


def test_runs_list_with_nothing_stored_is_empty_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "runs", "list")
    assert (code, err) == (0, "")
    assert "no runs stored here yet" in out
    code, out, _ = cli(capsys, "runs", "list", "--json")
    assert (code, json.loads(out)) == (0, [])
    assert not (tmp_path / ".personae").exists()


def test_demo_keep_that_is_a_file_names_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "f"
    blocker.write_text("mine\n")
    code, _, err = cli(capsys, "demo", "--keep", str(blocker))
    assert code == 1
    assert one_error_line(err).endswith("--keep: not a folder")
    assert blocker.read_text() == "mine\n"


@pytest.mark.process
def test_runs_list_never_cuts_run_ids_when_piped(tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    assert spawn("demo", "--keep", str(kept), cwd=tmp_path).returncode == 0
    listing = spawn("runs", "list", cwd=kept, env={"COLUMNS": "40"})
    assert listing.returncode == 0, listing.stderr
    ids = json.loads(spawn("runs", "list", "--json", cwd=kept).stdout)
    assert len(ids) == 1
    assert ids[0]["id"] in listing.stdout
    shown = spawn("runs", "show", ids[0]["id"], cwd=kept)
    assert shown.returncode == 0, shown.stderr


def test_doctor_and_serve_describe_the_mind_paths_alike(
    capsys: pytest.CaptureFixture[str], isolated_home: Path
) -> None:
    helps = {}
    for command in ("doctor", "serve"):
        assert run_cli([command, "--help"]) == 0
        helps[command] = flat(capsys.readouterr().out)
    for text in (
        "Memory folder (default .personae/memory).",
        "Mind contract prompt file (default .personae/mind.md).",
        "SQLite store (default .personae/state.db).",
    ):
        assert text in helps["doctor"]
        assert text in helps["serve"]
