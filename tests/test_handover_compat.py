"""Handovers written by other implementations of the format are accepted (issue 11): HPC environment
recorded but not applied, durations with units (bare milliseconds for --handover-timeout),
/scratch and the user's data folder as default roots, unknown targets refused at create."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _helpers import ProjectFactory, personae_cli
from personae.errors import UsageError
from personae.handover import runflow
from personae.handover.create import build_handover, write_handover
from personae.handover.duration import format_seconds, parse_duration
from personae.security.policy import SCRATCH_ROOT, default_roots

HPC_ENV = {
    "SLURM_JOB_ID": "4242",
    "OMP_NUM_THREADS": "8",
    "LD_LIBRARY_PATH": "/opt/hdf5/lib",
    "PYTHONPATH": "/opt/sci/python",
    "MODULE_PATH": "/opt/modules",
}


def cli(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    drop = [k for k in HPC_ENV if k != "PYTHONPATH"]
    return personae_cli(*args, cwd=cwd, drop=drop, env={"COLUMNS": "200", **(env or {})})


@pytest.fixture
def project(project_factory: ProjectFactory) -> Path:
    return project_factory(
        {"viz": "---\nname: viz\ndescription: Plots.\ntools: [read_file]\n---\nPlot.\n"}
    )


def _hpc_handover(project: Path) -> Path:
    h = build_handover(source_persona="hpc", target_persona="viz", task="Plot it", cwd=project)
    data = h.model_dump(mode="json", by_alias=True)
    data["source"]["environment"] = dict(HPC_ENV)  # as an HPC handover writer captures it
    path = project / "hpc.json"
    path.write_text(json.dumps(data))
    return path


def test_hpc_environment_is_accepted_recorded_and_not_applied(project: Path) -> None:
    path = _hpc_handover(project)
    out = cli(project, "handover", "validate", "hpc.json")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok:")
    warning = next(line for line in out.stderr.splitlines() if "not applied" in line)
    for name in ("LD_LIBRARY_PATH", "MODULE_PATH", "PYTHONPATH"):
        assert name in warning
    assert "SLURM_JOB_ID" not in warning
    environ: dict[str, str] = {}
    session = runflow.begin(path, None, cwd=project, non_interactive=True, environ=environ)
    assert environ == {"SLURM_JOB_ID": "4242", "OMP_NUM_THREADS": "8"}  # applied: allowed only
    held = "source.environment: LD_LIBRARY_PATH, MODULE_PATH, PYTHONPATH recorded but not applied"
    assert any(w.startswith(held) for w in session.warnings)
    saved = json.loads(path.read_text())
    assert saved["source"]["environment"] == HPC_ENV  # recorded as written


def test_config_can_allow_a_dangerous_variable(project: Path) -> None:
    path = _hpc_handover(project)
    (project / ".personae" / "config.yaml").write_text(
        "handover:\n  env_allow: [LD_LIBRARY_PATH]\n"
    )
    environ: dict[str, str] = {}
    session = runflow.begin(path, None, cwd=project, non_interactive=True, environ=environ)
    assert environ["LD_LIBRARY_PATH"] == "/opt/hdf5/lib"
    held = "source.environment: MODULE_PATH, PYTHONPATH recorded but not applied"
    assert any(w.startswith(held) for w in session.warnings)


def test_code_injecting_variable_still_refuses_the_file(project: Path) -> None:
    path = _hpc_handover(project)
    data = json.loads(path.read_text())
    data["source"]["environment"]["LD_PRELOAD"] = "/tmp/evil.so"
    path.write_text(json.dumps(data))
    out = cli(project, "handover", "validate", "hpc.json")
    assert out.returncode == 1 and "LD_PRELOAD" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("text", "bare", "seconds"),
    [
        ("300000", "ms", 300.0),  # callers' bare milliseconds
        ("300000ms", "ms", 300.0),
        ("300s", "ms", 300.0),
        ("5m", "ms", 300.0),
        ("1h", "s", 3600.0),
        ("300", "s", 300.0),
        ("0.5s", "s", 0.5),
    ],
)
def test_durations_with_units(text: str, bare: str, seconds: float) -> None:
    assert parse_duration(text, bare=bare) == pytest.approx(seconds)  # type: ignore[arg-type]
    assert parse_duration(format_seconds(seconds), bare="ms") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["0", "-5s", "5d", "soon", "", "1e3"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(UsageError, match="duration"):
        parse_duration(text, bare="ms", flag="--handover-timeout")


def test_help_shows_the_units_and_bad_values_are_usage_errors(project: Path) -> None:
    run_help = cli(project, "run", "--help")
    assert "bare number is milliseconds" in " ".join(run_help.stdout.split())
    handover_help = cli(project, "handover", "run", "--help")
    assert "bare number is seconds" in " ".join(handover_help.stdout.split())
    bad = cli(project, "run", "x", "--handover-timeout", "5 days")
    assert bad.returncode == 2 and "--handover-timeout" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_scratch_and_the_user_data_folder_are_default_roots(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "personae-home"
    (home / "shared").mkdir(parents=True)
    (home / "shared" / "big.h5").write_text("x")
    monkeypatch.setenv("PERSONAE_HOME", str(home))
    made = not SCRATCH_ROOT.exists()
    if made:
        try:
            SCRATCH_ROOT.mkdir()
        except OSError as exc:
            pytest.fail(f"this test needs {SCRATCH_ROOT} (or rights to create it): {exc}")
    try:
        roots = default_roots(project)
        assert SCRATCH_ROOT in roots and home in roots
        out = cli(
            project, "handover", "create", "--to", "viz", "--task", "t",
            "--file", f"{home}/shared/big.h5:data", "--file", f"{SCRATCH_ROOT}/run1/out.h5:data",
            env={"PERSONAE_HOME": str(home)},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        files = json.loads(Path(out.stdout.strip()).read_text())["artifacts"]["files"]
        assert [f["path"] for f in files] == [f"{home}/shared/big.h5", "/scratch/run1/out.h5"]
    finally:
        if made:
            shutil.rmtree(SCRATCH_ROOT, ignore_errors=True)


def test_unknown_target_is_an_error_at_create(project: Path) -> None:
    out = cli(project, "handover", "create", "--to", "vis", "--task", "t")
    assert out.returncode == 2 and out.stdout == ""  # usage: --to names no persona
    assert "target persona 'vis'" in out.stderr and "did you mean 'viz'" in out.stderr
    assert not list(project.glob(".personae/handovers/*"))
    bundled = cli(project, "handover", "create", "--to", "researcher", "--task", "t")
    assert bundled.returncode == 0, bundled.stderr  # bundled personas are known everywhere
    created = write_handover(
        build_handover(source_persona="a", target_persona="viz", task="t", cwd=project),
        cwd=project,
    )
    assert created.path.exists()


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-6, max_value=1e12, allow_nan=False, allow_infinity=False))
def test_a_formatted_timeout_reads_back(seconds: float) -> None:
    text = format_seconds(seconds)  # what a handover parent passes its child
    assert "e" not in text.removesuffix("s").removesuffix("m")
    assert parse_duration(text, bare="ms") == pytest.approx(seconds, rel=1e-12)


@pytest.mark.parametrize("seconds", [1_000_000.0, 1_234_567.0, 100_000.5, 1e-7])
def test_large_and_odd_timeouts_read_back(seconds: float) -> None:
    assert parse_duration(format_seconds(seconds), bare="ms") == pytest.approx(seconds)
