"""Shared set-up for the real-host tests: binaries, throwaway projects and homes, runs.

The host binaries come from npm (``scripts/setup.d/20-hosts.sh`` installs pinned
versions into ``$PERSONAE_CI_CACHE/hosts`` and exports ``PERSONAE_HOSTS_DIR``).
Each run gets a throwaway HOME (and CODEX_HOME), an ``env -i``-like environment
whose PATH does not contain personae, and a project where ``personae init`` and
``personae hosts render --write`` wrote the files. The model is the scripted
loopback server (:class:`personae.models.ScriptedServer`), never a real model.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from personae.models import Scenario, ScriptedServer

PERSONAE = str(Path(sys.executable).parent / "personae")
"""The installed entry point of this checkout (what `hosts render` writes)."""
EVIL = Path(__file__).with_name("evil_mcp.py")
SIDE_EFFECT = "side-effect.txt"
SHELL = f"echo ok >> {SIDE_EFFECT}"
"""The shell call every scenario makes: its side effect shows whether it ran."""
RUN_TIMEOUT = 240
"""Seconds one host run may take (runs take seconds; this is a hang guard)."""
BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
"""PATH inside host runs: node, sh and coreutils, but not personae."""

MIND = """# Ada

You are Ada, a careful reviewer. personae-e2e-contract-marker.
"""


def hosts_dir() -> Path:
    """Where the npm host packages are installed."""
    explicit = os.environ.get("PERSONAE_HOSTS_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("PERSONAE_CI_CACHE") or str(Path.home() / ".cache" / "personae-ci")
    return Path(cache) / "hosts"


def host_binary(name: str) -> Path:
    """The host's binary, or a test failure that says how to install it."""
    path = hosts_dir() / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(
            f"host binary {name!r} not found at {path}: run `source scripts/setup.d/20-hosts.sh` "
            "(needs npm; installs the pinned @anthropic-ai/claude-code, @openai/codex and "
            "@github/copilot) or set PERSONAE_HOSTS_DIR to a folder with node_modules/.bin/"
        )
    return path


@dataclass
class Sandbox:
    """A throwaway project and home for one host run; ``personae`` is the personae path
    the host files in the project name (for the hook and the mind server)."""

    root: Path
    home: Path
    personae: str = PERSONAE

    @property
    def side_effect(self) -> Path:
        return self.root / SIDE_EFFECT


def _personae(*args: str, cwd: Path) -> None:
    done = subprocess.run(
        [PERSONAE, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"personae {' '.join(args)} failed: {done.stderr}"


def make_sandbox(
    tmp_path: Path, *, hook_personae: str | None = None, gates: list[str] | None = None
) -> Sandbox:
    """``personae init`` + a mind contract + ``personae hosts render --write`` in a new project.

    ``hook_personae`` renders the host files for another personae path (e.g. an
    uninstalled one); ``gates`` renders ``--gate`` patterns instead of the host's defaults.
    """
    root, home = tmp_path / "project", tmp_path / "home"
    root.mkdir()
    home.mkdir()
    _personae("init", cwd=root)
    (root / ".personae" / "mind.md").write_text(MIND, encoding="utf-8")
    (root / ".personae" / "memory").mkdir()
    render = ["hosts", "render", "--write"]
    if hook_personae is not None:
        render += ["--personae", hook_personae]
    for gate in gates or []:
        render += ["--gate", gate]
    _personae(*render, cwd=root)
    return Sandbox(root, home, PERSONAE if hook_personae is None else hook_personae)


def clean_env(sandbox: Sandbox, **extra: str) -> dict[str, str]:
    """An ``env -i``-like environment: PATH without personae, a throwaway HOME (and the
    test's PYTHONPATH, so hooks and the mind server run the checkout under test)."""
    python_path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return {
        "PATH": BASE_PATH,
        "HOME": str(sandbox.home),
        "LANG": "C.UTF-8",
        "TMPDIR": str(sandbox.home),
        **python_path,
        **extra,
    }


@dataclass
class HostRun:
    """What a host run did: its output and every request the scripted server received."""

    returncode: int
    stdout: str
    stderr: str
    server: ScriptedServer

    def explain(self) -> str:
        served = [
            (a.text, [c.name for c in a.tool_calls]) if a else None for a in self.server.served
        ]
        return (
            f"exit {self.returncode}; served {served}\n--- stdout (tail)\n{self.stdout[-3000:]}"
            f"\n--- stderr (tail)\n{self.stderr[-3000:]}"
        )

    def results_for(self, tool: str) -> list[str]:
        """The tool result the host sent back for each call of ``tool``, in order."""
        if not self.server.requests:
            return []
        messages = self.server.requests[-1].get("messages", [])  # the whole history
        found = []
        for i, message in enumerate(messages):
            for call in message.get("tool_calls") or []:
                if call["function"]["name"] != tool:
                    continue
                found += [
                    str(m["content"])
                    for m in messages[i + 1 :]
                    if m.get("role") == "tool" and m.get("tool_call_id") == call.get("id")
                ][:1]
        return found

    def result_after(self, tool: str) -> str:
        """The tool result the host sent back for the first call of ``tool``."""
        found = self.results_for(tool)
        assert found, f"no tool result for {tool} in the requests\n{self.explain()}"
        return found[0]


def run_host(
    command: list[str], sandbox: Sandbox, env: dict[str, str], server: ScriptedServer
) -> HostRun:
    """Run the host to completion in the sandbox (a generous timeout guards hangs)."""
    try:
        done = subprocess.run(
            command,
            cwd=sandbox.root,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"{command[0]} did not finish in {RUN_TIMEOUT} s; served {server.served}"
        ) from exc
    return HostRun(done.returncode, done.stdout, done.stderr, server)


def scenario(steps: list[dict[str, Any]], rules: list[dict[str, Any]] | None = None) -> Scenario:
    """A scenario whose unmatched requests get a plain text answer (never a 500)."""
    return Scenario.model_validate(
        {"steps": steps, "rules": [*(rules or []), {"text": "scripted: nothing to do"}]}
    )


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def assert_spoof_unlocked_nothing(
    run: HostRun, sandbox: Sandbox, *, shell: str, spoof: str, blocked: str
) -> None:
    """Both shell calls were blocked although the spoofed bootstrap ran and claimed success."""
    assert run.server.remaining_steps == 0, run.explain()
    shells = run.results_for(shell)
    assert len(shells) == 2, run.explain()
    assert all(blocked in r for r in shells), shells
    # The spoof ran (only the shell is gated here) and claimed success: still locked.
    assert "mind_contract_available" in run.result_after(spoof), run.explain()
    assert not sandbox.side_effect.exists(), run.explain()


def assert_gate_failed_closed(run: HostRun, sandbox: Sandbox, *, shell: str) -> None:
    """With no personae binary for the hook, the shell call was blocked, not run."""
    assert run.server.remaining_steps == 0, run.explain()
    assert "the gate could not decide" in run.result_after(shell), run.explain()
    assert not sandbox.side_effect.exists(), run.explain()


class JsonLinesHost:
    """A host process speaking JSON lines on stdin and stdout; its stdout is read on a
    thread into :attr:`seen` (lines that are not JSON are skipped)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            self.seen.append(message)
            self.received(message)

    def received(self, message: dict[str, Any]) -> None:
        """Called on the reader thread for each message (after it is in :attr:`seen`)."""

    def send(self, message: dict[str, Any]) -> None:
        """Write one JSON line to the host's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        """Close stdin and wait for the host to end (killed after 30 s)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
