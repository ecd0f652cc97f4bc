"""The sandbox through whole runs: `personae run`, `chain run`, unattended children, the probe.

The scripted replay server (not a model) drives run_shell calls as a hostile
model would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from personae.tools.sandbox import bwrap_status

pytestmark = pytest.mark.sandbox

PERSONA = """---
name: sh
description: Runs shell commands.
tools: [run_shell]
---
You are sh.
"""


@pytest.fixture(autouse=True)
def _needs_bwrap() -> None:
    status = bwrap_status()
    assert status.available, f"{status.reason}: run scripts/setup.d/30-bubblewrap.sh"


def _scenario(*commands: str) -> dict[str, Any]:
    calls = [{"name": "run_shell", "args": {"command": c}} for c in commands]
    return {"steps": [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Run it"}]}},
        {"when": {"role": "worker"}, "tool_calls": calls},
        {"when": {"role": "worker"}, "text": "ran it"},
        {"when": {"role": "validator"}, "output": {
            "approved": True, "requirements_met": True, "issues": [],
            "completion_signal": {"confidence": "high", "progress_made": True}}},
        {"when": {"role": "manager"}, "text": "DONE"},
    ]}  # fmt: skip


def _project(root: Path, config: str = "") -> Path:
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "sh.md").write_text(PERSONA)
    (root / ".personae" / "config.yaml").write_text(config)
    return root


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PERSONAE_")}
    return {**env, **extra}


def _run(root: Path, *commands: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    (root / "scenario.yaml").write_text(yaml.safe_dump(_scenario(*commands)))
    done = subprocess.run(
        [sys.executable, "-m", "personae", "run", "go", "--persona", "sh", "--json",
         "--model", "scripted:scenario.yaml"],
        cwd=root, env=env or _env(), capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_personae_run_drops_capabilities_and_says_its_mode(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj")
    marker = f"/etc/personae-run-{os.getpid()}"
    events = _run(root, "grep CapEff /proc/self/status",
                  f"mount -o remount,rw / 2>&1 && touch {marker} || echo REFUSED-$?",
                  "mknod mem c 1 1 2>&1 || echo REFUSED-$?")  # fmt: skip
    assert events[0]["kind"] == "start"
    assert events[0]["data"]["sandbox"].startswith("bwrap (no capabilities")
    calls = [e["data"] for e in events if e["kind"] == "tool_call"]
    assert len(calls) == 3, calls
    assert all(c["ok"] for c in calls), calls
    out = {c["args"]["command"].split()[0]: c["result"] for c in calls}  # they may run at once
    assert "CapEff:\t0000000000000000" in out["grep"]
    assert "permission denied" in out["mount"] and "REFUSED-" in out["mount"]
    assert "Operation not permitted" in out["mknod"] and "REFUSED-" in out["mknod"]
    assert not os.path.exists(marker) and not (root / "mem").exists()


def test_mode_off_is_said_in_the_first_event(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj", "sandbox: {mode: 'off'}\n")
    events = _run(root, "true")
    assert events[0]["data"]["sandbox"] == "off (sandbox.mode: off)"


CHAIN = {
    "name": "widen",
    "defaults": {"timeout": 120, "retries": 0},
    "steps": [
        {"id": "one", "persona": "sh", "task": "widen", "model": "scripted:one.yaml"},
        {"id": "two", "persona": "sh", "task": "use it", "model": "scripted:two.yaml"},
    ],
}


def test_a_chain_step_cannot_widen_the_next(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "secret.txt").write_text("HOME-SECRET\n")
    root = _project(tmp_path / "proj", "sandbox: {mode: required}\n")
    config = (root / ".personae" / "config.yaml").read_text()
    widen = ("printf 'sandbox: {network: true, allow_paths: [\"~\"]}\\n' >> "
             ".personae/config.yaml; echo \"rc=$?\" > one.txt")  # fmt: skip
    use = f"cat {home}/secret.txt > two.txt 2>&1 || echo HIDDEN >> two.txt"
    (root / "one.yaml").write_text(yaml.safe_dump(_scenario(widen)))
    (root / "two.yaml").write_text(yaml.safe_dump(_scenario(use)))
    (root / "workflow.yaml").write_text(yaml.safe_dump(CHAIN))
    done = subprocess.run(
        [sys.executable, "-m", "personae", "chain", "run", "workflow.yaml"],
        cwd=root, env=_env(HOME=str(home)), capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (root / ".personae" / "config.yaml").read_text() == config
    assert (root / "one.txt").read_text().strip() not in ("", "rc=0")
    two = (root / "two.txt").read_text()
    assert "HIDDEN" in two and "HOME-SECRET" not in two


NO_BWRAP_CHILD = """
import asyncio, sys
from personae.tools import ToolLimits, ToolRegistry, Workspace
sub = ToolRegistry.builtin(Workspace(sys.argv[1]), limits=ToolLimits()).subset(["run_shell"])
try:
    print(asyncio.run(sub.dispatch("run_shell", {"command": ["/bin/echo", "RAN"]})).split()[0])
except Exception as exc:
    print("ERROR", exc)
"""


def _bin_with(tmp_path: Path, bwrap_script: str | None) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("true", "echo", "sh", "cat"):
        (bin_dir / tool).symlink_to(shutil.which(tool) or f"/bin/{tool}")
    if bwrap_script is not None:
        (bin_dir / "bwrap").write_text(bwrap_script)
        (bin_dir / "bwrap").chmod(0o755)
    return bin_dir


def test_an_unattended_run_refuses_to_run_unsandboxed(tmp_path: Path) -> None:
    bin_dir = _bin_with(tmp_path, None)  # no bubblewrap at all
    outs = {}
    for unattended in ("", "1"):
        env = {**os.environ, "PATH": str(bin_dir), "PERSONAE_UNATTENDED": unattended}
        outs[unattended] = subprocess.run(
            [sys.executable, "-c", NO_BWRAP_CHILD, str(tmp_path)], env=env,
            capture_output=True, text=True, timeout=60, check=False,
        ).stdout  # fmt: skip
    assert outs[""].strip() == "RAN"  # interactive, auto: warns and runs
    assert outs["1"].startswith("ERROR") and "unattended" in outs["1"]


def test_a_failing_probe_is_retried_and_never_drops_the_sandbox(tmp_path: Path) -> None:
    real = shutil.which("bwrap")
    assert real is not None
    count = tmp_path / "count"
    flaky = (
        "#!/bin/sh\n"
        f"n=$(cat {count} 2>/dev/null || echo 0); echo $((n+1)) > {count}\n"
        'if [ "$n" = 0 ]; then echo "bwrap: Creating new namespace failed: '
        'Resource temporarily unavailable" >&2; exit 1; fi\n'
        f'exec {real} "$@"\n'
    )
    bin_dir = _bin_with(tmp_path, flaky)
    (bin_dir / "grep").symlink_to(shutil.which("grep") or "/bin/grep")
    child = NO_BWRAP_CHILD.replace('["/bin/echo", "RAN"]', '"grep CapEff /proc/self/status"')
    env = {**os.environ, "PATH": str(bin_dir)}
    out = subprocess.run([sys.executable, "-c", child, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert out.stdout.strip() == "CapEff:", out.stdout + out.stderr
    assert "not sandboxed" not in out.stderr
    assert int(count.read_text()) >= 3  # failed probe, good probe, the command


def test_a_probe_that_keeps_failing_under_load_refuses(tmp_path: Path) -> None:
    busy = ("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Resource temporarily "
            "unavailable' >&2\nexit 1\n")  # fmt: skip
    bin_dir = _bin_with(tmp_path, busy)
    env = {**os.environ, "PATH": str(bin_dir)}
    out = subprocess.run([sys.executable, "-c", NO_BWRAP_CHILD, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert out.stdout.startswith("ERROR") and "never runs unsandboxed" in out.stdout, out.stdout
