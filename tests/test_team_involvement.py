"""Involvement level: decided by the validator's model call, with the keyword rule
as the offline fallback. The fallback is measured on a labelled set of task phrasings; the
model path runs a real turn with scripted validator answers."""

from __future__ import annotations

from pathlib import Path

import yaml

from _helpers import attempt, one_subtask, read, role_requests, run_team, team_project, verdict
from _helpers import events_of as kinds
from personae.team.involvement import involvement_for

LABELLED = Path(__file__).parent / "data" / "involvement" / "labelled.yaml"


def test_keyword_fallback_accuracy_on_the_labelled_set() -> None:
    cases = yaml.safe_load(LABELLED.read_text())
    assert len(cases) >= 30
    wrong = [
        (c["task"], c["level"], involvement_for(c["task"]).value)
        for c in cases
        if involvement_for(c["task"]).value != c["level"]
    ]
    accuracy = 1 - len(wrong) / len(cases)
    print(f"keyword fallback: {accuracy:.0%} of {len(cases)} labelled phrasings; wrong: {wrong}")
    assert accuracy >= 0.9, wrong
    # The three phrasings issue 11 reported, each right now.
    assert involvement_for("Could you double-check the March figures?").value == "thorough"
    assert involvement_for("Please QA the report").value == "thorough"
    assert involvement_for("Write a testing plan doc").value == "standard"


def test_the_validator_model_decides_the_level(tmp_path: Path) -> None:
    root = team_project(tmp_path)
    decided = verdict(True)
    decided["output"]["involvement_level"] = "thorough"
    # The keyword rule says standard for this phrasing; the model reads it as a QA request.
    task = "Look over the port setting once more before the release, please."
    assert involvement_for(task).value == "standard"
    looked = attempt(read("config.yaml"), "port 8081", decided)
    outcome, player = run_team(root, one_subtask("Look at the port", looked), task=task)
    assert kinds(outcome, "validation")[0].data["involvement_level"] == "thorough"
    instructions = role_requests(player, "validator")[0]["messages"][0]["content"]
    assert "decide the involvement level" in instructions
    assert "Keyword rule suggests: standard" in instructions


def test_without_a_model_answer_the_keyword_rule_decides(tmp_path: Path) -> None:
    root = team_project(tmp_path)
    checked = attempt(read("config.yaml"), "port 8081", verdict(True))
    outcome, _ = run_team(
        root, one_subtask("Check", checked), task="Could you double-check the port?"
    )
    assert kinds(outcome, "validation")[0].data["involvement_level"] == "thorough"
