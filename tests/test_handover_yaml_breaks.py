"""YAML handovers keep NEL, LS and PS characters (YAML would fold them into spaces)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from personae.handover.files import read_handover, save_handover
from personae.handover.schema import ContextHandover


def base() -> dict[str, Any]:
    return {
        "version": "1.0.0",
        "timestamp": "2026-01-01T00:00:00Z",
        "handoverId": "11111111-2222-3333-4444-555555555555",
        "source": {"persona": "data-analyst", "workingDirectory": "/tmp"},
        "target": {"persona": "report-writer", "task": "Write the report"},
        "artifacts": {"files": [{"path": "a.csv", "type": "data"}]},
    }


@pytest.mark.parametrize("text", ["\x85", "a\u2028b", "x\u2029", "mixed\x85line\nbreaks"])
def test_yaml_round_trip_keeps_unicode_line_breaks(tmp_path: Path, text: str) -> None:
    doc = base()
    doc["zzNote"] = [text]
    doc["target"]["task"] = f"task {text}"
    path = tmp_path / "h.yaml"
    save_handover(ContextHandover.model_validate(doc), path)
    loaded = read_handover(path).handover.model_dump(mode="json", by_alias=True)
    assert loaded["zzNote"] == [text]
    assert loaded["target"]["task"] == f"task {text}"
