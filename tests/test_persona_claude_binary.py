"""The real Claude Code binary and personae load the same agent and skill files.

Claude Code prints its ``system/init`` event (the agents, skills and slash
commands it loaded) before its first model request, so the binary runs here
with an unreachable model address: no model, no network, and the process is
stopped as soon as that first line is read. The binary comes from npm
(``scripts/setup.d/20-hosts.sh`` installs it; ``PERSONAE_HOSTS_DIR`` points at it).
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from _claude_layout import CLAUDE_AGENTS, CLAUDE_SKILLS, plugin_folders, write_marketplace
from personae.persona import Cast

LONG = "Build apps with the Claude API or the Anthropic SDK. " * 25
FILES: dict[str, bytes] = {
    ".claude/agents/bold.md": b"---\nname: bold\ndescription: **Bold**: reviews code\n---\nP\n",
    ".claude/agents/examples.md": (
        b"---\nname: examples\ndescription: Use this agent when: the user asks. "
        b"Examples: <example>Context: x</example>\n---\nP\n"
    ),
    ".claude/agents/hash.md": b"---\nname: hash\ndescription: For C# code #fast\n---\nP\n",
    ".claude/agents/tools.md": (
        b"---\nname: tools\ndescription: Lead.\ntools: Agent, MultiEdit, Read\n---\nP\n"
    ),
    ".claude/agents/crlf.md": b"---\r\nname: crlf\r\ndescription: Windows: file\r\n---\r\nP\r\n",
    ".claude/commands/deploy.md": b"---\ndescription: a slash command\n---\nrun\n",
    ".claude/skills/long-skill/SKILL.md": (
        f"---\nname: long-skill\ndescription: {LONG}\n---\nB\n".encode()
    ),
    ".claude/skills/bold-skill/SKILL.md": (
        b"---\nname: bold-skill\ndescription: **S**: does s\n---\nB\n"
    ),
}
AGENTS = {"bold", "examples", "hash", "tools", "crlf", "deploy"}
SKILLS = {"long-skill", "bold-skill"}


def claude_binary() -> Path:
    explicit = os.environ.get("PERSONAE_HOSTS_DIR")
    cache = os.environ.get("PERSONAE_CI_CACHE") or str(Path.home() / ".cache" / "personae-ci")
    path = Path(explicit or Path(cache) / "hosts") / "node_modules" / ".bin" / "claude"
    if not path.exists():
        pytest.fail(
            f"Claude Code binary not found at {path}: run `source scripts/setup.d/20-hosts.sh` "
            "(needs npm) or set PERSONAE_HOSTS_DIR to a folder with node_modules/.bin/claude"
        )
    return path


def claude_init(project: Path, home: Path, *extra: str) -> dict[str, Any]:
    """Claude Code's ``system/init`` stream-json event for ``project`` (then the process is
    stopped); ``extra`` are more command-line arguments (``--plugin-dir DIR``)."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "IS_SANDBOX": "1",
        "ANTHROPIC_API_KEY": "unused",
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",  # nothing listens: no model is reached
    }
    args = [str(claude_binary()), "-p", "hi", "--output-format", "stream-json", "--verbose"]
    args += extra
    proc = subprocess.Popen(
        args,
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            assert sel.select(timeout=120), "Claude Code printed nothing within 120 s"
        line = proc.stdout.readline()
        while line and json.loads(line).get("subtype") != "init":  # hook events come first
            line = proc.stdout.readline()
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    event = json.loads(line)
    assert event["type"] == "system" and event["subtype"] == "init", line[:200]
    return dict(event)


def test_claude_code_and_personae_load_the_same_files(tmp_path: Path) -> None:
    project, home = tmp_path / "project", tmp_path / "home"
    home.mkdir()
    for rel, data in FILES.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_bytes(data)
    init = claude_init(project, home)
    claude_agents = set(init["agents"]) & AGENTS
    claude_skills = set(init["skills"]) & SKILLS
    # What Claude Code 2.1 loads: the lenient cases, not the CRLF file, not the command.
    assert claude_agents == {"bold", "examples", "hash", "tools"}
    assert claude_skills == SKILLS  # the over-long description loads
    assert "deploy" in init["slash_commands"]

    cast = Cast.load(project)
    assert cast.errors == []
    # personae loads the same set plus the CRLF file, which it flags as a deviation.
    assert set(cast.personas) == claude_agents | {"crlf"}
    crlf_warnings = [w for w in cast.warnings if w.file.name == "crlf.md"]
    assert any("Claude Code does not load this file" in w.message for w in crlf_warnings)
    assert set(cast.skills) == claude_skills
    assert cast.get("tools").claude_tools == ["Agent", "MultiEdit", "Read"]


def test_plugins_load_under_the_names_claude_code_lists(tmp_path: Path) -> None:
    """Anthropic's marketplace layout: the binary's ``plugin:name`` agents and skills are
    the ones personae loads (and answers to), file-named fallbacks included."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    home.mkdir()
    market = write_marketplace(tmp_path / "market")
    dirs = [arg for folder in plugin_folders(market) for arg in ("--plugin-dir", str(folder))]
    init = claude_init(project, home, *dirs)
    claude_agents = {a for a in init["agents"] if ":" in a}
    claude_skills = {s for s in init["skills"] if ":" in s}
    assert claude_agents == CLAUDE_AGENTS
    assert claude_skills == CLAUDE_SKILLS

    cast = Cast.load(project, [market])
    assert cast.errors == []
    # listed under the names the binary lists; each bare name (unique here) finds it too
    assert set(cast.personas) == claude_agents
    assert set(cast.skills) == claude_skills
    assert {cast.get(a.rsplit(":", 1)[-1]).name for a in claude_agents} == claude_agents
    assert {cast.skill(s.rsplit(":", 1)[-1]).name for s in claude_skills} == claude_skills


def claude_validate(folder: Path, home: Path) -> dict[str, Any]:
    """``claude plugin validate --json FOLDER``: Claude Code's own report on a plugin."""
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "LANG": "C.UTF-8",
           "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip
    done = subprocess.run(
        [str(claude_binary()), "plugin", "validate", "--json", str(folder)],
        cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return dict(json.loads(done.stdout))


def test_warnings_only_where_claude_codes_validator_speaks(tmp_path: Path) -> None:
    """On the marketplace fixture plus two plugins that share an agent name, the agent files
    personae warns about are exactly those ``claude plugin validate`` reports on (each
    plugin in turn); the lenient reads and the tools personae lacks, about which it says
    nothing, are notes here. Both plugins' ``reviewer`` and ``checklist`` skill load, as
    the binary lists them, with no override warning."""
    home = tmp_path / "home"
    home.mkdir()
    market = write_marketplace(tmp_path / "market")
    clash = tmp_path / "clash"
    for name, tools in (("style", "Read, TodoWrite, NotebookRead"), ("audit", "Read, Grep")):
        folder = clash / name
        (folder / ".claude-plugin").mkdir(parents=True)
        (folder / ".claude-plugin/plugin.json").write_text(json.dumps({"name": name}))
        (folder / "agents").mkdir()
        (folder / "agents/reviewer.md").write_text(
            f"---\nname: reviewer\ndescription: Reviews {name}.\ntools: {tools}\n---\nReview.\n"
        )
        (folder / "skills/checklist").mkdir(parents=True)  # a skill both plugins ship
        (folder / "skills/checklist/SKILL.md").write_text(
            f"---\nname: checklist\ndescription: The {name} checklist.\n---\nCheck.\n"
        )
    plugins = [*plugin_folders(market), clash / "style", clash / "audit"]
    flagged = set()
    for folder in plugins:
        report = claude_validate(folder, home)
        for part in [report.get("manifest") or {}, *report.get("contents", [])]:
            if part.get("type") in ("agent", "skill") and (part["errors"] or part["warnings"]):
                flagged.add(Path(part["file"]).resolve())
    assert {p.name for p in flagged} == {"code-simplifier.md", "maker.md"}  # measured

    cast = Cast.load(tmp_path / "home", [market, clash / "style", clash / "audit"])
    assert cast.errors == []
    assert {w.file.resolve() for w in cast.warnings} == flagged
    assert {n.file.name for n in cast.notes} == {"comment-checker.md", "reviewer.md"}

    project = tmp_path / "project"
    project.mkdir()
    dirs = [a for p in (clash / "style", clash / "audit") for a in ("--plugin-dir", str(p))]
    init = claude_init(project, home, *dirs)
    listed = set(init["agents"])
    assert {"style:reviewer", "audit:reviewer"} <= listed and "reviewer" not in listed
    skills = set(init["skills"])
    assert {"style:checklist", "audit:checklist"} <= skills and "checklist" not in skills
    assert cast.skill("style:checklist").description == "The style checklist."
    assert cast.skill("audit:checklist").description == "The audit checklist."
    assert cast.ambiguous_skills["checklist"] == ["style:checklist", "audit:checklist"]
    assert cast.get("style:reviewer").description == "Reviews style."
    assert cast.get("audit:reviewer").description == "Reviews audit."
    assert cast.find("reviewer") is None and cast.ambiguous["reviewer"] == [
        "style:reviewer",
        "audit:reviewer",
    ]
