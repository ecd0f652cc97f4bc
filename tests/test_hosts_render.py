"""`personae hosts render|check` and `personae doctor`."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from _helpers import personae_cli
from personae.errors import UsageError
from personae.hosts.adapters import ADAPTERS, Host
from personae.hosts.render import INSTRUCTION_FILES, check, plan, write
from personae.hosts.snippets import BEGIN, END, MAX_SNIPPET_CHARS, REQUIRED_MARKERS, snippet


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd)


@pytest.mark.parametrize("host", ["claude", "codex", "copilot"])
def test_snippets_have_markers_and_fit(host: str) -> None:
    text = snippet(host)
    assert len(text) < MAX_SNIPPET_CHARS
    missing = [m for m in REQUIRED_MARKERS if m not in text]
    assert missing == []
    assert text.startswith(BEGIN) and text.rstrip().endswith(END)
    # Fallback order is stated in order.
    order = [text.index(n) for n in ("get_system_prompt", "context()", "list_memory_files")]
    assert order == sorted(order)


@pytest.mark.parametrize("host", ["claude", "codex", "copilot"])
def test_every_file_names_each_hosts_real_tool_names(host: str) -> None:
    """Hosts read each other's files (Copilot CLI reads CLAUDE.md and AGENTS.md too): each
    names every host's own tool name, and the way each host finds deferred MCP tools."""
    text = snippet(host)
    own = ADAPTERS[Host(host)].mcp_tool("bootstrap_session")
    assert f"call `{own}()` once" in text
    for other in Host:
        assert f"`{ADAPTERS[other].mcp_tool('bootstrap_session')}`" in text
    assert "`personae-bootstrap_session`" in text  # Copilot CLI's name
    assert "`ToolSearch`" in text  # Claude Code defers MCP tools behind it
    assert "`tool_search`" in text  # Codex with its own models hides them behind it


def test_render_write_then_check_via_cli(tmp_path: Path) -> None:
    (tmp_path / ".personae").mkdir()  # --write needs a project (outside one it writes nothing)
    (tmp_path / "CLAUDE.md").write_text("# Mine\n\nKeep this line.\n", encoding="utf-8")
    (tmp_path / ".claude").mkdir()
    settings = {
        "permissions": {"allow": ["Read"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}]
        },
    }
    (tmp_path / ".claude" / "settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (tmp_path / ".mcp.json").write_text(
        '{"mcpServers": {"other": {"command": "x"}}}', encoding="utf-8"
    )

    before = _cli("hosts", "check", cwd=tmp_path)
    assert before.returncode == 1 and "FAIL" in before.stdout
    printed = _cli("hosts", "render", cwd=tmp_path)
    assert printed.returncode == 0 and "===== AGENTS.md (new) =====" in printed.stdout
    assert not (tmp_path / "AGENTS.md").exists()  # printing writes nothing
    assert "~/.claude/CLAUDE.md" in printed.stdout  # home-dir files: printed, not written

    first = _cli("hosts", "render", "--write", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    after = _cli("hosts", "check", cwd=tmp_path)
    assert after.returncode == 0, after.stdout
    assert after.stdout.count("OK  ") == 13 and "FAIL" not in after.stdout
    assert after.stdout.count("the hook denies by itself after") == 3

    claude = (tmp_path / "CLAUDE.md").read_text(encoding="utf-8")
    assert claude.startswith("# Mine\n\nKeep this line.\n") and BEGIN in claude
    merged = json.loads((tmp_path / ".claude" / "settings.json").read_text(encoding="utf-8"))
    assert merged["permissions"] == {"allow": ["Read"]}
    commands = [h["command"] for e in merged["hooks"]["PreToolUse"] for h in e["hooks"]]
    assert commands[0] == "lint" and len(commands) == 2
    personae = str(Path(sys.executable).parent / "personae")
    assert commands[1].endswith(f"{personae} hook pre-tool-use --host claude")
    mcp = json.loads((tmp_path / ".mcp.json").read_text(encoding="utf-8"))
    assert set(mcp["mcpServers"]) == {"other", "personae"}
    copilot = json.loads((tmp_path / ".github/hooks/personae.json").read_text(encoding="utf-8"))
    assert copilot["version"] == 1
    assert copilot["hooks"]["preToolUse"][0]["bash"].endswith(
        f"{personae} hook pre-tool-use --host copilot"
    )
    assert mcp["mcpServers"]["personae"] == {"command": personae, "args": ["serve"]}
    codex = tomllib.loads((tmp_path / ".codex/config.toml").read_text(encoding="utf-8"))
    assert codex["mcp_servers"]["personae"] == {"command": personae, "args": ["serve"]}

    snapshot = {p: (tmp_path / p).read_text(encoding="utf-8") for p in INSTRUCTION_FILES}
    again = _cli("hosts", "render", "--write", cwd=tmp_path)
    assert again.stdout.count("unchanged:") == 8
    assert {p: (tmp_path / p).read_text(encoding="utf-8") for p in INSTRUCTION_FILES} == snapshot


def test_rerender_replaces_an_edited_block_only(tmp_path: Path) -> None:
    write(tmp_path, plan(tmp_path))
    path = tmp_path / "AGENTS.md"
    text = path.read_text(encoding="utf-8").replace("reflect(", "REMOVED(")
    path.write_text("Intro.\n\n" + text + "\nOutro.\n", encoding="utf-8")
    assert not next(i for i in check(tmp_path) if i.name == "AGENTS.md").ok
    write(tmp_path, plan(tmp_path))
    final = path.read_text(encoding="utf-8")
    assert final.startswith("Intro.\n") and final.endswith("Outro.\n")
    assert final.count(BEGIN) == 1 and "REMOVED(" not in final


def test_gate_patterns_are_carried_into_hook_commands(tmp_path: Path) -> None:
    write(tmp_path, plan(tmp_path, ["Bash", "mcp__github__.*"]))
    codex = json.loads((tmp_path / ".codex/hooks.json").read_text(encoding="utf-8"))
    command = codex["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
    assert command.endswith("hook pre-tool-use --host codex --gate Bash --gate 'mcp__github__.*'")
    # The unlock calls are matched too: the gate records which session makes them.
    assert codex["hooks"]["PreToolUse"][0]["matcher"] == (
        "^(?:Bash)$|^(?:mcp__github__.*)$"
        "|^(?:mcp__personae__bootstrap_session|mcp__personae__get_system_prompt)$"
    )
    write(tmp_path, plan(tmp_path, ["it's"]))
    claude = json.loads((tmp_path / ".claude/settings.json").read_text(encoding="utf-8"))
    assert claude["hooks"]["PreToolUse"][0]["hooks"][0]["command"].endswith("""--gate 'it'"'"'s'""")
    assert len(claude["hooks"]["PreToolUse"]) == 1  # replaced, not duplicated


def test_broken_files_are_reported_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / ".personae").mkdir()
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex" / "hooks.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(UsageError, match=r"\.codex/hooks\.json:1: not valid JSON"):
        plan(tmp_path)
    (tmp_path / "CLAUDE.md").write_text(BEGIN + "\nhalf a block\n", encoding="utf-8")
    proc = _cli("hosts", "render", "--write", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith("personae: error:")
    assert "Traceback" not in proc.stderr
    assert (tmp_path / ".codex" / "hooks.json").read_text(encoding="utf-8") == "{not json"
    assert not (tmp_path / "AGENTS.md").exists()  # nothing half-written


def test_never_writes_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(UsageError, match="home directory"):
        write(tmp_path, plan(tmp_path))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.process
def test_doctor_reports_ok_and_fail_with_fixes(tmp_path: Path) -> None:
    bad = _cli("doctor", "--no-probe", "--hosts", cwd=tmp_path)
    assert bad.returncode == 1
    assert "FAIL mind contract" in bad.stdout and "fix:" in bad.stdout
    personae_dir = tmp_path / ".personae"
    (personae_dir / "memory").mkdir(parents=True)
    (personae_dir / "mind.md").write_text("Contract.\n", encoding="utf-8")
    write(tmp_path, plan(tmp_path))
    good = _cli("doctor", cwd=tmp_path)
    assert "OK   server answers bootstrap" in good.stdout, good.stdout + good.stderr
    assert "OK   mind contract" in good.stdout and "OK   CLAUDE.md" in good.stdout
    assert "OK   personae entry point:" in good.stdout  # what the host files run
    # Only the model (none configured here) may fail.
    failing = [line for line in good.stdout.splitlines() if line.startswith("FAIL")]
    assert all("FAIL model:" in line for line in failing), failing


def test_check_fails_an_mcp_entry_whose_command_is_gone(tmp_path: Path) -> None:
    write(tmp_path, plan(tmp_path))
    mcp = tmp_path / ".mcp.json"
    data = json.loads(mcp.read_text(encoding="utf-8"))
    entry = data["mcpServers"]["personae"]
    assert next(i for i in check(tmp_path) if i.name == ".mcp.json").ok
    for command, said in (
        (str(tmp_path / "old-venv" / "bin" / "personae"), "which is not an executable file"),
        ("no-such-personae-program", "not found on PATH"),
    ):
        entry["command"] = command
        mcp.write_text(json.dumps(data), encoding="utf-8")
        item = next(i for i in check(tmp_path) if i.name == ".mcp.json")
        assert item.level == "FAIL" and said in item.detail and command in item.detail


def test_render_names_every_host_global_instruction_file(tmp_path: Path) -> None:
    from personae.hosts.snippets import global_instructions

    moved = global_instructions({"CODEX_HOME": "/srv/codex", "CLAUDE_CONFIG_DIR": "/c/"})
    assert moved == {
        "claude": "/c/CLAUDE.md",
        "codex": "/srv/codex/AGENTS.md",
        "copilot": "~/.copilot/copilot-instructions.md",
    }
    drop = ("CODEX_HOME", "CLAUDE_CONFIG_DIR")
    done = personae_cli("hosts", "render", "--json", cwd=tmp_path, drop=drop)
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert {g["host"]: g["path"] for g in body["global_instructions"]} == {
        "claude": "~/.claude/CLAUDE.md",
        "codex": "~/.codex/AGENTS.md",
        "copilot": "~/.copilot/copilot-instructions.md",
    }
    for path in ("~/.claude/CLAUDE.md", "~/.codex/AGENTS.md", "~/.copilot/copilot-instructions.md"):
        assert path in body["home_instructions"]


@pytest.mark.parametrize("rel", list(INSTRUCTION_FILES))
def test_every_host_file_carries_the_routing_rule(tmp_path: Path, rel: str) -> None:
    changes = {c.path: c.text for c in plan(tmp_path, personae="/opt/personae")}
    block = changes[rel]
    assert "Body rules" in block and "security and tool use" in block
    assert "continuity and voice" in block and "refresh_persona" in block
