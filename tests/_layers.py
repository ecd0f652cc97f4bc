"""``scripts/layers.py`` (the import graph of ``src/personae``) loaded as a module, for the
tests that check imports: one load, shared."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def _load_layers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("personae_layers", ROOT / "scripts" / "layers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while decorating
    spec.loader.exec_module(module)
    return module


layers = _load_layers()
"""The loaded ``scripts/layers.py``."""
