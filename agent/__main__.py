"""`python -m agent` runs the CLI."""

from agent.cli import main

main()
