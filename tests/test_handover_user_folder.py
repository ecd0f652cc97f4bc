"""A user-level handover folder: PERSONAE_HANDOVER_DIR or `handover create --handover-dir`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from _helpers import run_personae
from personae.api.handover import HandoverSpec, create_handover, load_handover


def _project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    assert run_personae("init", cwd=root, timeout=120).returncode == 0
    (root / "data.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    return root


@pytest.mark.process
def test_the_setting_and_the_flag_choose_the_folder(tmp_path: Path) -> None:
    root = _project(tmp_path)
    home = tmp_path / "home"
    env = dict(os.environ, HOME=str(home), PERSONAE_HANDOVER_DIR="~/.personae/handovers")
    args = ("handover", "create", "--from", "analyst", "--to", "writer", "--no-target-check",
            "--task", "Report on data.csv", "--file", "data.csv:data:the table")  # fmt: skip
    made = run_personae(*args, cwd=root, env=env, timeout=120)
    assert made.returncode == 0, made.stderr
    path = Path(made.stdout.strip())
    folder = home / ".personae" / "handovers"
    assert path.parent == folder and path.name.startswith("handover-")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # handovers may carry private data
    assert not (root / ".personae" / "handovers").exists() or not any(
        (root / ".personae" / "handovers").iterdir()
    )
    shown = run_personae("handover", "show", str(path), cwd=root, env=env, timeout=120)
    assert shown.returncode == 0 and "data.csv" in shown.stdout
    # The flag wins over the setting.
    other = tmp_path / "elsewhere"
    flagged = run_personae(*args, "--handover-dir", str(other), cwd=root, env=env, timeout=120)
    assert flagged.returncode == 0, flagged.stderr
    assert Path(flagged.stdout.strip()).parent == other


@pytest.mark.process
def test_api_folder_and_the_handover_loads_from_it(tmp_path: Path) -> None:
    root = _project(tmp_path)
    folder = tmp_path / "user-handovers"
    spec = HandoverSpec(
        to="writer", task="Report", source="analyst", files=["data.csv:data"],
        check_target=False, folder=folder,
    )  # fmt: skip
    created = create_handover(spec, cwd=root)
    assert created.path.parent == folder.resolve()
    loaded = load_handover(created.path, cwd=root)
    assert loaded.handover.artifacts.files[0].format == "csv"
