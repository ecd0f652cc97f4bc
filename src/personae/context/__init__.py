"""personae.context."""

__all__: list[str] = []
