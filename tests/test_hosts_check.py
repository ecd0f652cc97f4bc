"""`personae hosts check`: matchers under each host's rules; commands that resolve and deny."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest

from _helpers import personae_cli
from personae.errors import UsageError
from personae.hosts.adapters import ADAPTERS
from personae.hosts.checkitem import CheckItem, item_lines
from personae.hosts.hostcheck import check_hooks, hook_binary
from personae.hosts.matchers import matcher_problem
from personae.hosts.render import plan, write

OLD_MATCHER = "Bash|Write|Edit|MultiEdit|NotebookEdit|WebFetch|Task|mcp__(?!personae__).*"


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd, env={"COLUMNS": "100"})


def test_one_check_item_for_doctor_and_hosts_check() -> None:
    passed = CheckItem.judged("a", True, "fine", "never shown")
    failed = CheckItem.judged("b", False, "broken", "mend it")
    warned = CheckItem("c", "WARN", "works, but", "better this way")
    assert (passed.level, passed.fix, passed.ok) == ("OK", "", True)
    assert (failed.level, failed.fix, failed.ok) == ("FAIL", "mend it", False)
    assert warned.ok
    assert item_lines([passed, failed, warned]) == [
        "OK   a: fine",
        "FAIL b: broken",
        "     fix: mend it",
        "WARN c: works, but",
        "     fix: better this way",
    ]


@pytest.mark.parametrize(
    ("pattern", "rust", "ecma"),
    [
        (OLD_MATCHER, "look-ahead", None),
        ("(?<=x)Bash", "look-behind", None),
        (r"(a)\1", "backreference", None),
        ("a++", "possessive", "possessive"),
        ("(?P<n>Bash)", None, "Python-style named group"),
        (r"Bash\Z", r"\Z", r"\Z"),
        ("[(?!]Bash", None, None),  # inside a class: literal characters
        (r"\(?!x", None, None),  # escaped parenthesis
        ("Bash(", "invalid regex", "invalid regex"),
        (ADAPTERS["codex"].matcher, None, None),
        (ADAPTERS["claude"].matcher, None, None),
    ],
)
def test_matcher_dialects(pattern: str, rust: str | None, ecma: str | None) -> None:
    for dialect, expected in (("rust", rust), ("ecmascript", ecma)):
        problem = matcher_problem(pattern, dialect)
        if expected is None:
            assert problem is None, (dialect, problem)
        else:
            assert problem is not None and expected in problem, (dialect, problem)


def test_render_refuses_a_gate_no_host_can_compile(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="look-ahead"):
        plan(tmp_path, ["mcp__(?!personae__).*"])


def test_the_old_look_ahead_matcher_and_bare_command_fail_with_the_fix(tmp_path: Path) -> None:
    # The host files an earlier personae wrote: a look-ahead Codex drops, a PATH lookup.
    old = {
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": OLD_MATCHER,
                    "hooks": [
                        {"type": "command", "command": "personae hook pre-tool-use", "timeout": 10}
                    ],
                }
            ]
        }
    }
    (tmp_path / ".codex").mkdir()
    (tmp_path / ".codex/hooks.json").write_text(json.dumps(old), encoding="utf-8")
    items = [i for i in check_hooks(tmp_path) if not i.ok]
    matcher = next(i for i in items if "look-ahead" in i.detail)
    assert matcher.name == ".codex/hooks.json matcher"
    assert "skips the whole hook group" in matcher.detail
    assert "personae hosts render --write" in matcher.fix
    misses = next(i for i in items if i.detail.startswith("misses"))
    assert "apply_patch" in misses.detail
    command = next(i for i in items if i.name == ".codex/hooks.json command")
    assert "not an absolute path" in command.detail
    proc = _cli("hosts", "check", cwd=tmp_path)
    assert proc.returncode == 1 and "FAIL .codex/hooks.json matcher" in proc.stdout


def test_check_runs_each_hook_as_its_host_would(tmp_path: Path) -> None:
    write(tmp_path, plan(tmp_path))
    items = check_hooks(tmp_path)
    gates = [i for i in items if i.name.endswith(" gate")]
    assert len(gates) == 3 and all(i.ok for i in gates), items
    assert "permissionDecision 'deny'" in next(i.detail for i in gates if "github" in i.name)
    assert all(i.ok for i in items)
    # A hook pointing at an uninstalled personae: the wrapper still denies, check says so.
    moved = tmp_path / "gone" / "personae"
    write(tmp_path, plan(tmp_path, personae=str(moved)))
    items = check_hooks(tmp_path)
    missing = [i for i in items if i.name.endswith(" command")]
    assert len(missing) == 3 and all("does not exist" in i.detail for i in missing)
    assert all(i.ok for i in items if i.name.endswith(" gate"))  # fails closed


def test_codex_config_toml_merges_and_stays_valid(tmp_path: Path) -> None:
    (tmp_path / ".codex").mkdir()
    mine = '[profiles.fast]\nmodel = "x"\n'
    (tmp_path / ".codex/config.toml").write_text(mine, encoding="utf-8")
    write(tmp_path, plan(tmp_path, personae="/opt/p/bin/personae"))
    write(tmp_path, plan(tmp_path, personae="/opt/q/bin/personae"))  # idempotent block
    text = (tmp_path / ".codex/config.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    assert data["profiles"] == {"fast": {"model": "x"}}
    assert data["mcp_servers"]["personae"]["command"] == "/opt/q/bin/personae"
    assert text.count("personae:begin") == 1
    (tmp_path / ".codex/config.toml").write_text(
        '[mcp_servers.personae]\ncommand = "mine"\n', encoding="utf-8"
    )
    with pytest.raises(UsageError, match="already defined"):
        plan(tmp_path)


def test_hook_binary_finds_the_wrapped_program() -> None:
    from personae.hosts.wrapper import hook_command

    command = hook_command(ADAPTERS["claude"], "/a b/personae", ["--host", "claude"])
    assert hook_binary(command) == "/a b/personae"
    assert hook_binary("personae hook pre-tool-use") == "personae"
    assert hook_binary("'unclosed") is None


def test_doctor_includes_the_hook_checks(tmp_path: Path) -> None:
    # Host files that use personae, then a Codex hooks file that no longer runs the gate.
    assert _cli("init", cwd=tmp_path).returncode == 0
    assert _cli("hosts", "render", "--write", cwd=tmp_path).returncode == 0
    (tmp_path / ".codex" / "hooks.json").write_text('{"hooks": {}}\n', encoding="utf-8")
    proc = _cli("doctor", "--no-probe", cwd=tmp_path)
    assert proc.returncode == 1
    assert "FAIL .codex/hooks.json: no hook running `personae hook pre-tool-use`" in proc.stdout
