"""personae.mind."""

__all__: list[str] = []
