"""Handover schema and file format: round trips, versions, corrupt files, JSON Schema."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from personae.errors import UsageError
from personae.handover.files import parse_handover, read_handover, save_handover
from personae.handover.jsonschema import handover_json_schema_text
from personae.handover.schema import MAX_FILE_BYTES, ContextHandover

DOCS = Path(__file__).resolve().parents[1] / "docs"


def base(**extra: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "version": "1.0.0",
        "timestamp": "2026-01-01T00:00:00Z",
        "handoverId": "11111111-2222-3333-4444-555555555555",
        "source": {
            "persona": "data-analyst",
            "sessionId": "s1",
            "workingDirectory": "/tmp",
            "environment": {"OMP_NUM_THREADS": "4"},
        },
        "target": {
            "persona": "report-writer",
            "task": "Write the report",
            "interactive": False,
            "returnResults": True,
        },
        "artifacts": {
            "files": [{"path": "a.csv", "type": "data", "description": "numbers", "format": "csv"}],
            "data": {"rows": 3},
            "insights": ["up 5%"],
        },
        "context": {
            "history": [
                {"persona": "x", "task": "t", "summary": "s", "timestamp": "2026-01-01T00:00:00Z"}
            ],
            "mcpServers": ["fs"],
            "memorySnapshot": "m",
        },
        "results": {
            "status": "partial",
            "output": "o",
            "artifacts": ["r.md"],
            "error": "e",
            "nextSteps": ["n"],
        },
    }
    doc.update(extra)
    return doc


def test_camel_case_wire_names() -> None:
    h = ContextHandover.model_validate(base())
    assert h.source.working_directory == "/tmp"
    assert h.target.return_results is True
    dumped = h.model_dump(mode="json", by_alias=True)
    assert dumped == base()


@pytest.mark.parametrize("suffix", [".json", ".yaml", ".yml"])
def test_unknown_fields_survive_round_trip_at_every_level(tmp_path: Path, suffix: str) -> None:
    doc = base(futureTop={"a": [1, None]})
    doc["source"]["hostName"] = "node7"
    doc["target"]["priority"] = 3
    doc["artifacts"]["checksum"] = "abc"
    doc["artifacts"]["files"][0]["sizeBytes"] = 10
    doc["context"]["history"][0]["tokens"] = 12
    doc["context"]["notes"] = None
    doc["results"]["metrics"] = {"f1": 0.9}
    src = tmp_path / f"in{suffix}"
    src.write_text(json.dumps(doc) if suffix == ".json" else yaml.safe_dump(doc))
    loaded = read_handover(src)
    out = tmp_path / f"out{suffix}"
    save_handover(loaded.handover, out)
    again = read_handover(out).handover.model_dump(mode="json", by_alias=True)
    assert again == doc


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyzXYZ", min_size=3, max_size=8).map(
    lambda k: "zz" + k
)
_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    extras=st.dictionaries(
        st.sampled_from(["top", "source", "target", "artifacts", "file", "context", "results"]),
        st.dictionaries(_keys, _values, min_size=1, max_size=3),
    ),
    fmt=st.sampled_from(["json", "yaml"]),
)
def test_property_unknown_fields_round_trip(
    tmp_path: Path, extras: dict[str, dict[str, Any]], fmt: str
) -> None:
    doc = base()
    where = {
        "top": doc,
        "source": doc["source"],
        "target": doc["target"],
        "artifacts": doc["artifacts"],
        "file": doc["artifacts"]["files"][0],
        "context": doc["context"],
        "results": doc["results"],
    }
    for place, fields in extras.items():
        where[place].update(fields)
    path = tmp_path / f"h.{fmt}"
    save_handover(ContextHandover.model_validate(doc), path)
    assert read_handover(path).handover.model_dump(mode="json", by_alias=True) == doc


def test_yaml_and_json_autodetected_without_suffix(tmp_path: Path) -> None:
    j = tmp_path / "handover"
    j.write_text(json.dumps(base()))
    assert read_handover(j).format == "json"
    y = tmp_path / "handover2"
    y.write_text(yaml.safe_dump(base()))
    assert read_handover(y).format == "yaml"


def test_unquoted_yaml_timestamps_become_strings(tmp_path: Path) -> None:
    text = yaml.safe_dump(base()).replace("'2026-01-01T00:00:00Z'", "2026-01-01T00:00:00Z")
    path = tmp_path / "h.yaml"
    path.write_text(text)
    assert read_handover(path).handover.timestamp.startswith("2026-01-01T00:00:00")


def test_newer_major_version_refused_clearly(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(json.dumps({"version": "2.0.0", "totally": "different"}))
    with pytest.raises(UsageError) as err:
        read_handover(path)
    assert "newer" in str(err.value) and "2.0.0" in str(err.value) and str(path) in str(err.value)


def test_newer_minor_version_accepted(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(json.dumps(base(version="1.7.2")))
    assert read_handover(path).handover.version == "1.7.2"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ('{"version": "1.0.0", "source": {', "truncated"),
        ("[1, 2]", "mapping"),
        ('{"version": NaN}', "NaN"),
        ("a: &x [1]\nb: *x\n", "aliases"),
        ("key: [unclosed\n", "malformed YAML"),
    ],
)
def test_corrupt_files_fail_with_clear_message(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / ("h.yaml" if "key" in text or "&x" in text else "h.json")
    path.write_text(text)
    with pytest.raises(UsageError) as err:
        read_handover(path)
    assert needle in str(err.value)
    assert str(path) in str(err.value)


def test_truncated_at_every_length_never_crashes(tmp_path: Path) -> None:
    raw = json.dumps(base()).encode()
    path = tmp_path / "h.json"
    for cut in range(0, len(raw), 7):
        path.write_bytes(raw[:cut])
        with pytest.raises(UsageError):
            read_handover(path)


def test_missing_field_names_the_field(tmp_path: Path) -> None:
    doc = base()
    del doc["target"]["task"]
    path = tmp_path / "h.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsageError) as err:
        read_handover(path)
    assert "target.task" in str(err.value)


def test_bad_enum_and_too_long_text_refused(tmp_path: Path) -> None:
    doc = base()
    doc["artifacts"]["files"][0]["type"] = "binary"
    with pytest.raises(UsageError, match=r"artifacts\.files\[0\]\.type"):
        parse_handover(json.dumps(doc), tmp_path / "h.json")
    doc = base()
    doc["target"]["task"] = "x" * 20_001
    with pytest.raises(UsageError, match=r"target\.task"):
        parse_handover(json.dumps(doc), tmp_path / "h.json")


def test_file_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    with path.open("wb") as fh:
        fh.write(b'{"pad": "')
        fh.write(b"x" * MAX_FILE_BYTES)
        fh.write(b'"}')
    with pytest.raises(UsageError, match="larger than"):
        read_handover(path)


def test_invalid_utf8_overlong_encoding_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    raw = json.dumps(base()).encode().replace(b"a.csv", b"\xc0\xae\xc0\xae/a.csv")
    path.write_bytes(raw)
    with pytest.raises(UsageError, match="not valid UTF-8"):
        read_handover(path)


def test_handover_id_must_be_filename_safe(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="handoverId"):
        parse_handover(json.dumps(base(handoverId="../../etc/x")), tmp_path / "h.json")


def test_persona_names_cannot_look_like_flags(tmp_path: Path) -> None:
    doc = base()
    doc["target"]["persona"] = "--model=evil"
    with pytest.raises(UsageError, match=r"target\.persona"):
        parse_handover(json.dumps(doc), tmp_path / "h.json")


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    save_handover(ContextHandover.model_validate(base()), path)
    save_handover(ContextHandover.model_validate(base(version="1.0.1")), path)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["h.json"]  # no temp file, and the lock file is removed on release
    assert read_handover(path).handover.version == "1.0.1"


def test_published_schema_matches_model() -> None:
    assert (DOCS / "handover.schema.json").read_text() == handover_json_schema_text()


@pytest.mark.process
def test_schema_command_prints_generated_schema() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "personae", "handover", "schema"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    schema = json.loads(out)
    assert out == handover_json_schema_text()
    props = schema["properties"]
    assert {"version", "timestamp", "handoverId", "source", "target", "artifacts"} <= set(props)
    assert "workingDirectory" in schema["$defs"]["Source"]["properties"]
