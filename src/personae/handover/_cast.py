"""What the project's cast says about a handover's personas (names only, never files)."""

from __future__ import annotations

from pathlib import Path

from personae.errors import closest_name

__all__ = ["persona_facts"]


def persona_facts(root: Path, source: str, target: str) -> tuple[list[str] | None, list[str]]:
    """``(mcp server names of the source persona or None, warnings)`` from the cast at ``root``.

    An unknown target is a warning, not an error: the target may run elsewhere
    with another cast (the receiving run refuses an unknown persona itself).
    """
    from personae.persona.cast import Cast

    cast = Cast.load(root)
    warnings: list[str] = []
    if cast.personas and target not in cast.personas:
        near = closest_name(target, cast.personas)
        hint = f"; did you mean {near!r}?" if near else ""
        warnings.append(f"target persona {target!r} is not in this project's cast{hint}")
    persona = cast.personas.get(source)
    servers = sorted(persona.mcp_servers) if persona is not None else None
    return servers, warnings
