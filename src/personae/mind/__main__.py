"""``python -m personae.mind``: the mind server over stdio with the project defaults."""

from personae.cli.app import run_cli

run_cli(["serve"])
