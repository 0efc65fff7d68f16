"""Compact Agent: a terminal coding agent built around context management."""

__version__ = "0.1.0"
RESUME_PICK = "?"  # --resume without an id (agent/cli.py): the REPL lists the sessions and asks which
