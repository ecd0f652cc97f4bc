"""A sub-agent's ``run_shell`` uses its own persona's sandbox grants, cut to its parent's.

Real bubblewrap sandbox (config ``sandbox.mode: required``), real files under
a test ``$HOME``, the team runtime driven by the scripted replay server's
function model: the parent persona may read ``~/shared`` and ``~/leadonly``;
the child persona asks for ``~/shared`` and ``~/extra``. Inside the child's
command only ``~/shared`` is visible: not the parent's other grant (the child's
own grants apply), not ``~/extra`` (never more than the parent).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from _helpers import VALIDATOR_OK as OK
from _helpers import run_async
from personae.models import ModelResolver, Scenario, scripted_function_model
from personae.persona.model import Persona, SandboxGrant
from personae.project import SandboxConfig
from personae.team.session import RunOptions, run_turn
from personae.team.toolbox import narrow_sandbox, persona_limits
from personae.tools.base import ToolLimits

LEAD = """---
name: lead
description: Delegates.
tools: [run_shell, agent]
sandbox:
  allow_paths: ["~/shared", "~/leadonly"]
---
You are lead.
"""

KID = """---
name: kid
description: Reads with its own grants.
tools: [run_shell]
sandbox:
  allow_paths: ["~/shared", "~/extra"]
---
CHILD-KID: run the command."""

# The command's own $HOME is the workspace: the files are named by absolute path.
READ = "for f in {h}/shared/a.txt {h}/leadonly/b.txt {h}/extra/c.txt; do cat $f 2>&1; done; true"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    for name, text in {
        "shared/a.txt": "A-SHARED",
        "leadonly/b.txt": "B-LEAD",
        "extra/c.txt": "C-X",
    }.items():
        (home / name).parent.mkdir(parents=True)
        (home / name).write_text(text + "\n")
    monkeypatch.setenv("HOME", str(home))
    return home


def _shell(command: str) -> dict[str, Any]:
    return {"name": "run_shell", "args": {"command": command}}


def test_sub_agent_shell_uses_its_own_grants_narrowed(tmp_path: Path, home: Path) -> None:
    root = tmp_path / "proj"
    (root / ".personae" / "personas").mkdir(parents=True)
    (root / ".personae" / "personas" / "lead.md").write_text(LEAD)
    (root / ".personae" / "personas" / "kid.md").write_text(KID)
    (root / ".personae" / "config.yaml").write_text(
        yaml.safe_dump({"sandbox": {"mode": "required"}})
    )
    read = READ.format(h=home)
    steps = [
        {"when": {"role": "manager"}, "output": {"subtasks": [{"description": "Delegate"}]}},
        {"when": {"role": "worker"}, "tool_calls": [_shell(read)]},
        {"when": {"role": "worker"},
         "tool_calls": [{"name": "agent", "args": {"name": "kid", "task": "read"}}]},
        {"when": {"contains": "CHILD-KID"}, "tool_calls": [_shell(read)]},
        {"when": {"contains": "CHILD-KID"}, "text": "read"},
        {"when": {"role": "worker"}, "text": "done"},
        {"when": {"role": "validator"}, "output": OK},
        {"when": {"role": "manager"}, "text": "final"},
    ]  # fmt: skip
    model = scripted_function_model(Scenario.model_validate({"steps": steps}))
    options = RunOptions(root=root, persona="lead", include_git_log=False)
    outcome = run_async(
        run_turn("Read.", options, resolver=ModelResolver.using(model, "scripted:t"))
    )
    assert model.player.remaining_steps == 0
    shells = [
        e for e in outcome.events if e.kind.value == "tool_call" and e.data["tool"] == "run_shell"
    ]
    assert len(shells) == 2 and all(e.data["ok"] for e in shells), [e.data for e in shells]
    lead, kid = (str(e.data["result"]) for e in shells)
    assert "A-SHARED" in lead and "B-LEAD" in lead and "C-X" not in lead
    assert shells[1].data.get("persona") == "kid"
    assert "A-SHARED" in kid
    assert "B-LEAD" not in kid  # the parent's grant is not the child's
    assert "C-X" not in kid  # the child's own grant beyond its parent's is cut


def test_narrow_sandbox_never_widens() -> None:
    config = SandboxConfig(allow_paths=["/opt/data"])
    parent = persona_limits(
        config, Persona(name="p", description="d"), ToolLimits(read_max_bytes=7)
    )
    wants = Persona(
        name="c",
        description="d",
        sandbox=SandboxGrant(
            network=True, allow_paths=["/opt/data/sub", "/opt/other", "/opt/database"]
        ),
    )
    child = narrow_sandbox(parent, persona_limits(config, wants, parent))
    assert child.shell_network is False  # the parent has no network
    assert child.shell_allow_paths == ("/opt/data", "/opt/data/sub")
    assert child.read_max_bytes == 7
    open_parent = persona_limits(SandboxConfig(network=True), None)
    assert narrow_sandbox(open_parent, persona_limits(SandboxConfig(), None)).shell_network is False
    assert narrow_sandbox(open_parent, open_parent).shell_network is True
