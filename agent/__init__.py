"""Compact Agent: a terminal coding agent built around context management."""

__version__ = "0.1.0"
