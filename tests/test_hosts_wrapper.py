"""The hook wrapper bounds the gate by itself: no timeout(1), any POSIX sh, every host contract.

A hook that outlives the host's own limit (10 s) is killed and the tool RUNS; stock macOS
has no ``timeout``. Each case runs the rendered hook command as the host does (``sh -c``)
with a PATH that has no ``timeout`` on it, under dash and bash.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from personae.hosts.adapters import ADAPTERS
from personae.hosts.hostcheck import check_hooks
from personae.hosts.render import plan, write
from personae.hosts.wrapper import LIMIT_SECONDS, bounds_itself, hook_command

SHELLS = [s for s in ("/bin/dash", "/bin/bash") if os.path.exists(s)]
PERSONAE = str(Path(sys.executable).parent / "personae")
BOUND = 8.0
"""The issue's promise: the gate denies within 8 s, whatever the entry point does."""


@pytest.fixture
def bare_path(tmp_path: Path) -> str:
    """A PATH folder with the few programs the wrapper may use, and no ``timeout``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("sh", "sleep", "rm", "mkdir"):
        found = shutil.which(tool)
        assert found is not None, tool
        (folder / tool).symlink_to(found)
    assert shutil.which("timeout", path=str(folder)) is None
    return str(folder)


def _script(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def _run(
    shell: str, host: str, binary: str, path: str, stdin: bytes = b"{}", **env: str
) -> tuple[subprocess.CompletedProcess[bytes], float]:
    command = hook_command(ADAPTERS[host], binary, ["--host", host])
    started = time.monotonic()
    done = subprocess.run(
        [shell, "-c", command],
        input=stdin,
        capture_output=True,
        env={"PATH": path, "TMPDIR": env.get("TMPDIR", "/tmp"), "HOME": "/nonexistent"},
        timeout=30,
        check=False,
    )
    return done, time.monotonic() - started


def _denied(host: str, done: subprocess.CompletedProcess[bytes], reason: str) -> bool:
    if ADAPTERS[host].json_deny:
        if done.returncode != 0 or not done.stdout.strip():
            return False
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        return bool(
            answer["permissionDecision"] == "deny" and reason in answer["permissionDecisionReason"]
        )
    return done.returncode == 2 and reason in done.stderr.decode()


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("host", sorted(ADAPTERS))
def test_an_entry_point_that_hangs_before_python_is_denied_in_time(
    shell: str, host: str, tmp_path: Path, bare_path: str
) -> None:
    # The entry point never starts Python: it sleeps far past every host's limit.
    hung = _script(tmp_path, "personae", "exec sleep 60\n")
    done, took = _run(shell, host, hung, bare_path)
    assert took < BOUND, took
    assert took >= LIMIT_SECONDS - 0.5, took  # the watchdog, not an early failure, decided
    assert _denied(host, done, "exited 124" if not ADAPTERS[host].json_deny else "exit 124")


@pytest.mark.parametrize("shell", SHELLS)
def test_a_hung_entry_points_children_do_not_hold_the_hosts_pipes(
    shell: str, tmp_path: Path, bare_path: str
) -> None:
    # The child inherits the entry point's stdout and stderr: if they were the host's
    # pipes, the host would wait for it (and kill the hook at 10 s, then run the tool).
    pids = tmp_path / "child.pid"
    hung = _script(tmp_path, "personae", f'sleep 60 & echo $! > "{pids}"; wait\n')
    try:
        done, took = _run(shell, "claude", hung, bare_path)
        assert took < BOUND, took
        assert _denied("claude", done, "exited 124")
    finally:
        if pids.exists():
            os.kill(int(pids.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("host", sorted(ADAPTERS))
def test_the_gates_own_answer_and_stdin_pass_through(
    shell: str, host: str, tmp_path: Path, bare_path: str
) -> None:
    # A stand-in that echoes its stdin and arguments, writes a reason and exits 2.
    body = 'while IFS= read -r l; do printf "in:%s\\n" "$l"; done; echo why >&2; exit 2\n'
    echo = _script(tmp_path, "personae", body)
    payload = b'{"tool_name": "Bash", "text": "a\\\\b  c"}\n'
    done, _ = _run(shell, host, echo, bare_path, stdin=payload)
    assert done.stdout.startswith(b"in:" + payload.rstrip(b"\n")), done.stdout
    if ADAPTERS[host].json_deny:  # exit 2 is no answer in Copilot's contract: deny for it
        assert _denied(host, done, "exit 2")
    else:
        assert done.returncode == 2 and done.stderr == b"why\n"
    allow = _script(tmp_path, "allow", "while read -r l; do :; done; exit 0\n")
    done, _ = _run(shell, host, allow, bare_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert not list(Path("/tmp").glob(f"personae-gate.{os.getpid()}*"))


@pytest.mark.parametrize("host", sorted(ADAPTERS))
def test_the_real_gate_without_timeout_on_path(host: str, tmp_path: Path, bare_path: str) -> None:
    if ADAPTERS[host].json_deny:
        payload = {"sessionId": "s", "cwd": str(tmp_path), "toolName": "bash"}
    else:
        payload = {"session_id": "s", "cwd": str(tmp_path), "tool_name": "Bash"}
    done, took = _run("/bin/sh", host, PERSONAE, bare_path, stdin=json.dumps(payload).encode())
    assert _denied(host, done, "runs only after bootstrap_session succeeds"), done
    assert took < BOUND
    payload["toolName" if ADAPTERS[host].json_deny else "tool_name"] = "Read"
    done, _ = _run("/bin/sh", host, PERSONAE, bare_path, stdin=json.dumps(payload).encode())
    assert (done.returncode, done.stdout) == (0, b""), done


def test_no_private_temporary_folder_denies(tmp_path: Path, bare_path: str) -> None:
    # TMPDIR is a file: no folder there; /tmp is the fallback, so block it with a file too.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    ok = _script(tmp_path, "personae", "exit 0\n")
    command = hook_command(ADAPTERS["claude"], ok, ["--host", "claude"])
    script = command.replace("/tmp/personae-gate", f"{blocker}/personae-gate")
    done = subprocess.run(
        ["/bin/sh", "-c", script],
        input=b"{}",
        capture_output=True,
        env={"PATH": bare_path, "TMPDIR": str(blocker)},
        timeout=30,
        check=False,
    )
    assert done.returncode == 2 and b"exited 125" in done.stderr


def test_hosts_check_fails_a_hook_that_relies_on_timeout(tmp_path: Path) -> None:
    write(tmp_path, plan(tmp_path, personae=PERSONAE))
    items = {i.name: i for i in check_hooks(tmp_path)}
    bound = [i for n, i in items.items() if n.endswith("time limit")]
    assert len(bound) == 3 and all(i.level == "OK" for i in bound), bound
    # The wrapper of the previous release: `timeout` only when the system has it.
    settings = tmp_path / ".claude" / "settings.json"
    text = settings.read_text(encoding="utf-8")
    config = json.loads(text)
    hook = config["hooks"]["PreToolUse"][0]["hooks"][0]
    old = (
        'sh -c \'if command -v timeout >/dev/null 2>&1; then timeout -k 1 8 "$0" "$@"; '
        'else "$0" "$@"; fi; rc=$?; [ "$rc" -eq 0 ] && exit 0; exit 2\' '
        f"{PERSONAE} hook pre-tool-use --host claude"
    )
    assert not bounds_itself(ADAPTERS["claude"], old)
    hook["command"] = old
    settings.write_text(json.dumps(config), encoding="utf-8")
    items = {i.name: i for i in check_hooks(tmp_path)}
    failed = items[".claude/settings.json time limit"]
    assert failed.level == "FAIL" and "does not bound itself" in failed.detail
    assert "hosts render --write" in failed.fix
