"""``python -m personae`` runs the CLI."""

from personae.cli.app import main

main()
