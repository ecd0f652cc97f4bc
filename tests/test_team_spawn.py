"""Sub-agent isolation: forked children never see the parent's prompt, a parent's spawn
list is enforced at dispatch, the cast check catches children with tools their parent lacks,
and the bundled repo-researcher clones a local repository into a temporary workspace.

Turns run through ``run_turn`` with the in-process scripted function model; the cast check
runs through the ``personae personas check`` CLI in a subprocess.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from _helpers import events_of as events
from _helpers import requests_with, run_async, run_personae, tool_results
from _subagents import child, delegate, make_project, run, turn
from personae.models.scenario import ROLE_MARKER
from personae.persona import Cast
from personae.persona.bundled import bundled_personas

WORKER = ROLE_MARKER.format(role="worker")


def _write_lead(root: Path, frontmatter: str) -> None:
    (root / ".personae" / "personas" / "lead.md").write_text(
        f"---\nname: lead\ndescription: Delegates.\n{frontmatter}---\nYou are lead.\n"
    )


def test_fork_child_gets_shared_sections_but_never_the_parent_prompt(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    _, player = run(
        root, turn(delegate("relay", "Pass it on"), child("CHILD-RELAY", text="passed"))
    )
    relay = requests_with(player, "CHILD-RELAY")[0]
    text = json.dumps(relay["messages"])
    assert "DIRECTIVE-D" in text  # a shared section
    assert "You are lead." not in text  # the parent's persona prompt / execution block
    assert WORKER not in text
    parent = requests_with(player, WORKER)[0]
    assert "You are lead." in json.dumps(parent["messages"])  # it was there to leak


def test_claude_code_agent_syntax_is_a_spawn_list_enforced_at_dispatch(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    _write_lead(root, "tools: Agent(reader), Read, Write\n")
    assert Cast.load(root).get("lead").subagents == ["reader"]
    outcome, player = run(
        root,
        turn(
            delegate("scratch", "Write in scratch"),
            delegate("reader", "Read it"),
            child("CHILD-READER", text="read"),
        ),
    )
    assert not requests_with(player, "CHILD-SCRATCH")  # never ran
    after_refusal = requests_with(player, WORKER)[1]
    refused = json.loads(tool_results(after_refusal)[-1])
    assert refused["status"] == "failed"
    assert refused["error"] == "persona 'lead' may not spawn 'scratch'; it may spawn: reader"
    warning = [e for e in events(outcome, "warning") if e.data.get("action") == "spawn_refused"]
    assert warning and "may spawn: reader" in warning[0].message
    after_reader = requests_with(player, WORKER)[2]
    assert json.loads(tool_results(after_reader)[-1])["final_message"] == "read"
    # The parent is shown only the personas it may spawn.
    listing = json.dumps(requests_with(player, WORKER)[0]["messages"])
    assert "<available_agents>" in listing and "Works in a scratch folder" not in listing


def test_subagents_field_is_the_personae_spelling(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    _write_lead(root, "tools: [read_file, write_file, agent]\nsubagents: [scratch]\n")
    _, player = run(root, turn(delegate("reader", "Read it")))
    refused = json.loads(tool_results(requests_with(player, WORKER)[1])[-1])
    assert refused["error"] == "persona 'lead' may not spawn 'reader'; it may spawn: scratch"


def _personae(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_personae(
        *args, cwd=cwd, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(cwd)}
    )


@pytest.mark.process
def test_cast_check_names_both_files_when_a_child_has_tools_its_parent_lacks(
    tmp_path: Path,
) -> None:
    root = make_project(tmp_path)
    # lead may spawn scratch (write_file, read_file) but has only read_file itself.
    _write_lead(root, "tools: [read_file, agent]\nsubagents: [scratch, reader]\n")
    result = _personae(root, "personas", "check")
    out = result.stdout + result.stderr
    assert result.returncode != 0, out
    lead = root / ".personae" / "personas" / "lead.md"
    scratch = root / ".personae" / "personas" / "scratch.md"
    line = next(x for x in out.splitlines() if "'scratch'" in x and "write_file" in x)
    assert str(lead) in line and str(scratch) in line
    assert "'reader'" not in out  # reader's tools are within lead's
    errors = [p for p in Cast.load(root).errors if "may spawn" in p.message]
    assert len(errors) == 1 and errors[0].file == lead


def test_cast_check_refuses_an_unknown_name_in_the_spawn_list(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    _write_lead(root, "tools: [read_file, agent]\nsubagents: [raeder]\n")
    problems = [p.message for p in Cast.load(root).errors]
    assert "may spawn unknown persona 'raeder'; did you mean 'reader'?" in problems


def _local_repo(path: Path) -> Path:
    path.mkdir()
    (path / "README.md").write_text("REPO-README-MARK: the answer is 42.\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(path), "GIT_CONFIG_NOSYSTEM": "1"}
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "README.md"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(argv, cwd=path, check=True, env=env, timeout=30)
    return path


def test_bundled_repo_researcher_clones_a_local_repo_into_a_temp_workspace(
    tmp_path: Path,
) -> None:
    assert set(bundled_personas()) == {"researcher", "repo-researcher"}
    repo = _local_repo(tmp_path / "source-repo")
    root = make_project(tmp_path / "project")
    _write_lead(root, "tools: [read_file, run_shell, list_dir, glob, grep, agent]\n")
    # run_shell's sandbox hides /tmp (where pytest keeps the repo): let commands read it.
    (root / ".personae" / "config.yaml").write_text(f"sandbox:\n  allow_paths: [{repo}]\n")
    marker = "You are a repository researcher"
    clone = {"name": "run_shell", "args": {"command": ["git", "clone", "-q", str(repo), "repo"]}}
    outcome, player = run(
        root,
        turn(
            delegate("repo-researcher", f"Clone {repo} and tell me what its README says."),
            child(marker, tool_calls=[clone]),
            child(marker, tool_calls=[{"name": "read_file", "args": {"path": "repo/README.md"}}]),
            child(marker, text="The README says the answer is 42 (repo/README.md)."),
        ),
    )
    read = requests_with(player, marker)[-1]
    assert any("REPO-README-MARK" in r for r in tool_results(read)), tool_results(read)
    end = next(e for e in events(outcome, "subagent") if e.data["phase"] == "end")
    assert end.data["status"] == "success", end.data
    temp = Path(end.data["temp_workspace"])
    assert temp != root and not temp.exists()  # cloned into a temp workspace, then removed
    assert not (root / "repo").exists()
    returned = json.loads(tool_results(requests_with(player, WORKER)[1])[-1])
    assert returned["final_message"].startswith("The README says the answer is 42")


@pytest.mark.process
def test_bundled_personas_run_in_a_project_without_any_persona(tmp_path: Path) -> None:
    root = tmp_path / "bare"
    (root / ".personae").mkdir(parents=True)  # a project (runs refuse to start outside one)
    (root / "notes.md").write_text("NOTE-MARK: the release is on Friday.\n")
    scenario = {
        "steps": [
            {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Read notes"}]}},
            {"when": {"contains": "You are a researcher"},
             "tool_calls": [{"name": "read_file", "args": {"path": "notes.md"}}]},
            {"when": {"role": "worker"}, "text": "Friday (notes.md: NOTE-MARK)."},
            {"when": {"role": "validator"}, "output": {
                "approved": True, "requirements_met": True, "issues": [],
                "completion_signal": {"confidence": "high", "progress_made": True}}},
            {"when": {"role": "manager"}, "text": "The release is on Friday."},
        ]
    }  # fmt: skip
    (tmp_path / "s.json").write_text(json.dumps(scenario))
    result = run_personae(
        "run",
        "When is the release?",
        "--persona",
        "researcher",
        "--model",
        f"scripted:{tmp_path / 's.json'}",
        cwd=root,
        env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", "HOME": str(tmp_path)},
    )  # fmt: skip  (HOME is not the project: the user's data folder never marks one)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The release is on Friday." in result.stdout


def test_a_run_refuses_a_persona_whose_spawn_list_fails_the_cast_check(tmp_path: Path) -> None:

    import pytest

    from personae.errors import UsageError
    from personae.models import ModelResolver, Scenario, scripted_function_model
    from personae.team.session import RunOptions, run_turn

    root = make_project(tmp_path)
    _write_lead(root, "tools: [read_file, agent]\nsubagents: [scratch]\n")
    model = scripted_function_model(Scenario.model_validate({"steps": []}))
    options = RunOptions(root=root, persona="lead", include_git_log=False)
    with pytest.raises(UsageError, match="may spawn 'scratch'") as caught:
        run_async(run_turn("x", options, resolver=ModelResolver.using(model, "scripted:t")))
    assert caught.value.file == root / ".personae" / "personas" / "lead.md"
    assert model.player.requests == []  # nothing started
