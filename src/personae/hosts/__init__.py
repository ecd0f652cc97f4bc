"""personae.hosts."""

__all__: list[str] = []
