"""The typed Python front door of personae (exported from ``personae``).

- :mod:`personae.api.team`: :class:`~personae.api.team.Team` runs the team loop
  (``run``/``arun``/``run_stream``), the same code path as ``personae run``.
- :mod:`personae.api.results`: the typed results and stream items.
- :mod:`personae.api.context`: :func:`~personae.api.context.assemble` (one role's
  view, as ``personae context build``) and :func:`~personae.api.context.fit_messages`.
- :mod:`personae.api.handover`: handover create/load/run and chain run as functions.

Import names from ``personae`` (``from personae import Team``); this package stays
light, each module is imported on first use.
"""

from __future__ import annotations

__all__: list[str] = []
