"""Skills at run time (skills loaded for validation, Agent Skills level 2): the bodies of the
persona's skills the task calls for reach the worker, with ``!command`` lines expanded under
the project's allow list, and the validator for validation, within the skill budget.

Real turns through ``run_turn`` with the in-process scripted function model."""

from __future__ import annotations

import json
from pathlib import Path

from _helpers import attempt, one_subtask, read, role_requests, run_team, team_project, verdict
from _helpers import events_of as kinds

PERSONA = """---
name: dev
description: Writes reports.
tools: [read_file, grep, list_dir, write_file]
skills: [report-style, unrelated-skill]
---
You are dev.
"""


def _skill(root: Path, name: str, description: str, body: str) -> None:
    folder = root / ".personae" / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}")


def _project(tmp_path: Path, style_body: str | None = None) -> Path:
    root = team_project(tmp_path, PERSONA)
    _skill(
        root, "report-style", "House style for written reports (headings, tone, figures).",
        style_body or "L2-STYLE-RULE: figures in a table.\nVersion: !`echo SKILL-CMD-OUT`\n"
        "Denied: !`cat /etc/hostname`\n",
    )  # fmt: skip
    _skill(root, "unrelated-skill", "Rotating database credentials.", "L2-UNRELATED-BODY\n")
    (root / ".personae" / "config.yaml").write_text("commands:\n  enabled: true\n  allow: [echo]\n")
    return root


def _text(request: dict[str, object]) -> str:
    return json.dumps(request["messages"])


def test_called_for_skill_bodies_reach_the_worker_and_the_validator(tmp_path: Path) -> None:
    root = _project(tmp_path)
    reported = attempt(read("config.yaml"), "Report: port 8081 in a table.", verdict(True))
    task = "Write a short report on the port, in our report style."
    outcome, player = run_team(root, one_subtask("Write the report", reported), task=task)
    worker = _text(role_requests(player, "worker")[0])
    assert "L2-STYLE-RULE" in worker and "<skills>" in worker
    assert "SKILL-CMD-OUT" in worker and "echo SKILL-CMD-OUT" not in worker  # ran (allowed)
    assert "not in commands.allow" in worker  # cat is not allowed: not run
    assert "L2-UNRELATED-BODY" not in worker  # not called for
    validator = _text(role_requests(player, "validator")[0])
    assert "<skills_for_validation>" in validator and "L2-STYLE-RULE" in validator
    first = kinds(outcome, "work_result")[0].data
    assert first["skills"] == ["report-style"]
    assert kinds(outcome, "validation")[0].data["skills"] == ["report-style"]


def test_a_skill_the_worker_cites_is_loaded_for_validation(tmp_path: Path) -> None:
    root = _project(tmp_path)
    cited = attempt(read("config.yaml"), "Port 8081; I followed unrelated-skill.", verdict(True))
    _, player = run_team(root, one_subtask("Find the port", cited), task="Find the port.")
    assert "L2-UNRELATED-BODY" not in _text(role_requests(player, "worker")[0])
    validator = _text(role_requests(player, "validator")[0])
    assert "L2-UNRELATED-BODY" in validator and "L2-STYLE-RULE" not in validator


def test_skill_bodies_stay_within_the_budget(tmp_path: Path) -> None:
    root = _project(tmp_path, style_body="L2-STYLE-RULE\n" + "More house style text. " * 2000)
    reported = attempt(read("config.yaml"), "Report done.", verdict(True))
    task = "Write the report in report style."
    outcome, player = run_team(root, one_subtask("Write the report", reported), task=task)
    worker = _text(role_requests(player, "worker")[0])
    assert "L2-STYLE-RULE" in worker and "cut to fit the budget" in worker
    assert worker.count("More house style text.") < 1000
    cut = [e for e in kinds(outcome, "warning") if e.data.get("action") == "skills_cut"]
    assert cut and cut[0].data["cut"] == ["report-style"]
