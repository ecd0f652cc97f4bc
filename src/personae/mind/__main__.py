"""``python -m personae.mind``: the mind server over stdio with the project defaults."""

from personae.cli.app import main

main(["serve"])
