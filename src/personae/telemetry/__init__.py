"""Run telemetry: a stored run as a tree, exported as an OpenTelemetry trace when asked.

Off by default. :func:`export_if_enabled` does nothing (and imports nothing
of OpenTelemetry) unless an endpoint is given (``PERSONAE_OTEL_ENDPOINT`` or
the project config's ``otel_endpoint``, read by the CLI). The exporter itself
lives in :mod:`personae.telemetry.otel` (extra ``personae[otel]``).
"""

from __future__ import annotations

from pathlib import Path

from personae.errors import ConfigError

__all__ = ["export_if_enabled"]


def export_if_enabled(db: Path, run_id: str, endpoint: str | None) -> int:
    """Export run ``run_id`` of the store at ``db`` to ``endpoint``; 0 spans when it is unset.

    A missing ``personae[otel]`` extra is a :class:`~personae.errors.ConfigError`
    that says how to install it.
    """
    if not endpoint:
        return 0
    try:
        # local import: optional extra personae[otel], loaded only with an endpoint
        from personae.telemetry.otel import export_run
    except ImportError as exc:
        raise ConfigError(
            f"otel_endpoint is set but OpenTelemetry is not installed ({exc.name}); "
            "install it with: pip install 'personae[otel]'"
        ) from None
    return export_run(db, run_id, endpoint=endpoint)
