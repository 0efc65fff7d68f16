"""The permission engine goes by the tools' declarations (core.declaration), which importing the registry
makes, as the agent's session does before it judges a call. A test of the engine alone imports it here."""

import tools.registry  # noqa: F401
