"""The JSON Schema of the handover file, generated from the pydantic model."""

from __future__ import annotations

import json
from typing import Any

from personae.handover.schema import SCHEMA_VERSION, ContextHandover

__all__ = ["SCHEMA_ID", "handover_json_schema", "handover_json_schema_text"]

SCHEMA_ID = "https://personae.dev/schemas/handover-1.json"
"""The ``$id`` of the published schema."""


def handover_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a version-1 handover file (camelCase names)."""
    schema = ContextHandover.model_json_schema(by_alias=True, mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "personae ContextHandover",
        "description": (
            f"A personae handover file, version {SCHEMA_VERSION}. Unknown fields are allowed "
            "and kept on round trip; a newer major version is refused."
        ),
        **{k: v for k, v in schema.items() if k not in {"title", "description"}},
    }


def handover_json_schema_text() -> str:
    """The schema as deterministic, indented JSON text (what docs/handover.schema.json holds)."""
    return json.dumps(handover_json_schema(), indent=2, sort_keys=True) + "\n"
