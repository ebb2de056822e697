"""The version of mtl-mcp: one literal, read by the build (no metadata lookup at start-up)."""

__version__ = "0.4.0"
