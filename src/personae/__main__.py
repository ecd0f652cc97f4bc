"""``python -m personae`` runs the CLI."""

from personae.cli.entry import main

main()
