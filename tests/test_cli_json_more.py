"""``--json`` on handover create/run, chain run/status, hosts render/check; hosts from subdirs."""

from __future__ import annotations

import json
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from _helpers import personae_cli


def _cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return personae_cli(*args, cwd=cwd, timeout=timeout)


def _example(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(Path(str(resources.files("personae.examples") / "chain")), root)
    return root


def test_hosts_render_and_check_find_the_project_from_a_subfolder(tmp_path: Path) -> None:
    (tmp_path / ".personae").mkdir()
    deep = tmp_path / "src" / "deep"
    deep.mkdir(parents=True)
    before = _cli("hosts", "check", "--json", cwd=deep)
    assert before.returncode == 1, before.stderr
    report = json.loads(before.stdout)
    assert report["root"] == str(tmp_path.resolve()) and report["ok"] is False
    assert any(not item["ok"] and item["fix"] for item in report["items"])

    printed = json.loads(_cli("hosts", "render", "--json", cwd=deep).stdout)
    assert printed["root"] == str(tmp_path.resolve())
    agents = next(f for f in printed["files"] if f["path"] == "AGENTS.md")
    assert agents["existed"] is False and "get_system_prompt" in agents["text"]
    assert "~/.claude/CLAUDE.md" in printed["home_instructions"]
    assert not (tmp_path / "AGENTS.md").exists()  # printing writes nothing

    wrote = _cli("hosts", "render", "--write", "--json", cwd=deep)
    assert wrote.returncode == 0, wrote.stderr
    files = json.loads(wrote.stdout)["files"]
    assert files and all(f["written"] for f in files) and "text" not in files[0]
    assert (tmp_path / "AGENTS.md").is_file() and not (deep / "AGENTS.md").exists()
    assert (tmp_path / ".mcp.json").is_file() and not (deep / ".mcp.json").exists()

    after = _cli("hosts", "check", "--json", cwd=deep)
    assert after.returncode == 0, after.stdout
    assert json.loads(after.stdout)["ok"] is True
    text = _cli("hosts", "check", cwd=deep)  # the text form from the subfolder too
    assert text.returncode == 0 and "FAIL" not in text.stdout and "OK  " in text.stdout


@pytest.mark.process
def test_handover_create_and_run_json(tmp_path: Path) -> None:
    root = _example(tmp_path)
    created = _cli(
        "handover", "create", "--from", "data-analyst", "--to", "report-writer",
        "--task", "Write report.md from the figures.",
        "--file", "data/sales.csv:data:sales", "--json", cwd=root,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    made = json.loads(created.stdout)
    path = Path(made["path"])
    assert path.is_file() and made["target"] == "report-writer" and len(made["sha256"]) == 64
    assert made["handover_id"] in path.read_text()

    ran = _cli("handover", "run", made["path"], "--json", "--model",
               "scripted:report.scenario.yaml", cwd=root)  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    outcome = json.loads(ran.stdout)
    assert outcome["status"] == "success" and outcome["exit_code"] == 0
    assert outcome["path"] == str(path) and "12900" in outcome["output"]
    assert [a["attempt"] for a in outcome["attempts"]] == [1]
    assert outcome["attempts"][0]["exit_code"] == 0


@pytest.mark.process
def test_chain_run_and_status_json(tmp_path: Path) -> None:
    root = _example(tmp_path)
    before = _cli("chain", "status", "workflow.yaml", "--json", cwd=root)
    assert before.returncode == 0, before.stderr
    status = json.loads(before.stdout)
    assert status["started"] is False
    assert {s["status"] for s in status["steps"]} == {"pending"}

    ran = _cli("chain", "run", "workflow.yaml", "--json", cwd=root)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    assert lines[-1]["event"] == "done" and lines[-1]["status"] == "success"
    assert all(line["event"] == "step" for line in lines[:-1]) and len(lines) > 1
    assert {s["id"]: s["status"] for s in lines[-1]["steps"]} == {
        s["id"]: "success" for s in status["steps"]
    }
    assert Path(lines[-1]["report"]).is_file()

    after = json.loads(_cli("chain", "status", "workflow.yaml", "--json", cwd=root).stdout)
    assert after["started"] is True
    assert all(s["status"] == "success" and s["attempts"] >= 1 for s in after["steps"])


def test_json_errors_stay_one_line_on_stderr(tmp_path: Path) -> None:
    for args in (
        ("chain", "status", "missing.yaml", "--json"),
        ("chain", "run", "missing.yaml", "--json"),
        ("handover", "run", "missing.json", "--json"),
        ("handover", "create", "--to", "bad name", "--task", "x", "--json"),
    ):
        out = _cli(*args, cwd=tmp_path, timeout=60)
        assert out.returncode != 0 and out.stdout == "", (args, out.stdout)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("personae: error:"), (args, out.stderr)
