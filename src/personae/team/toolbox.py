"""What a persona may use of a run's tools: its tool names (:func:`narrow_names`), the
``run_shell`` sandbox grants of a persona (:func:`persona_limits`) and their
narrow-only form for a sub-agent (:func:`narrow_sandbox`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import replace

from personae.persona.model import Persona
from personae.project import SandboxConfig
from personae.tools.base import ToolLimits
from personae.tools.grants import effective_tool_names
from personae.tools.sandbox import expand_allowed

__all__ = ["narrow_names", "narrow_sandbox", "persona_limits"]


def narrow_names(persona: Persona, available: Iterable[str]) -> frozenset[str]:
    """A persona's effective tools within ``available`` (never more than ``available``)."""
    return frozenset(effective_tool_names(persona, available))


def persona_limits(
    config: SandboxConfig, persona: Persona | None, base: ToolLimits | None = None
) -> ToolLimits:
    """``base`` with the ``run_shell`` sandbox the project config and ``persona`` allow.

    Either grant is enough: network if the config or the persona allows it;
    the config's allowed paths plus the persona's. Control paths only as the
    config grants them to the persona by name (a persona file cannot).
    """
    network = config.network or (persona is not None and persona.sandbox.network)
    paths = [*config.allow_paths, *(persona.sandbox.allow_paths if persona else [])]
    return replace(
        base or ToolLimits(),
        shell_sandbox=config.mode,
        shell_network=network,
        shell_allow_paths=tuple(paths),
        control_write=tuple(config.control_write.get(persona.name, ())) if persona else (),
    )


def narrow_sandbox(parent: ToolLimits, wanted: ToolLimits) -> ToolLimits:
    """A sub-agent's sandbox: its own grants (``wanted``) cut to what ``parent`` has.

    Network only if both allow it; an allowed path only if it is one of the
    parent's or lies under one (``~`` expanded); a control path only if both
    may write it. Every other limit is the
    parent's: a child never gets more than its parent.
    """
    home = os.path.expanduser("~")
    roots = expand_allowed(parent.shell_allow_paths, home)
    kept = [
        raw
        for raw in wanted.shell_allow_paths
        if any(
            path == root or path.startswith(root.rstrip("/") + "/")
            for path in expand_allowed([raw], home)
            for root in roots
        )
    ]
    return replace(
        parent,
        shell_network=parent.shell_network and wanted.shell_network,
        shell_allow_paths=tuple(kept),
        control_write=tuple(n for n in wanted.control_write if n in parent.control_write),
    )
