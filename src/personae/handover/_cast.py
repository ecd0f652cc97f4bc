"""What the project's cast says about a handover's personas: the target exists, and the
source's MCP servers (never a persona file: names and server entries only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from personae.errors import UsageError, closest_name
from personae.persona.bundled import bundled_personas
from personae.persona.cast import Cast
from personae.persona.mcp_config import servers_for

__all__ = ["persona_facts"]


def persona_facts(
    root: Path, source: str, target: str, *, check_target: bool = True
) -> tuple[dict[str, Any] | None, list[str]]:
    """``(the source persona's MCP servers or None, warnings)`` from the cast at ``root``.

    The servers are those the source persona runs with (name -> its entry as configured,
    from the persona or the project; ``None`` when the name has no entry), ``None`` when
    the source is not a persona of the cast.

    With ``check_target``, a target that is neither in the project's cast nor a
    bundled persona is a :class:`UsageError` (field ``--to``) naming the closest
    name: personas are validated before a handover, so the failure shows at
    create time, not after a child process started. Without it (the target runs
    in another project's cast) it is a warning.
    """
    cast = Cast.load(root)
    known = {**bundled_personas(), **cast.personas}
    warnings: list[str] = []
    if target not in known and cast.find(target) is None:
        near = closest_name(target, known)
        hint = f"; did you mean {near!r}?" if near else ""
        message = f"target persona {target!r} is not in this project's cast{hint}"
        if check_target:
            valid = ", ".join(sorted(known))
            raise UsageError(f"{message} (valid: {valid})", field="--to")
        warnings.append(message)
    persona = cast.find(source)
    servers = servers_for(persona, cast.mcp_servers) if persona is not None else None
    return servers, warnings
