"""The personae command-line interface (nothing imports this package)."""
