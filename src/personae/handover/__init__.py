"""personae.handover."""

__all__: list[str] = []
