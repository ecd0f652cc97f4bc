"""personae.team."""

__all__: list[str] = []
