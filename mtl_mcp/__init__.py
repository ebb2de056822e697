"""mtl-mcp: a cross-project memory of abstract coding insights, served over MCP.

Importing this package imports nothing heavy: lancedb, fastembed and anthropic load
only when a store, an embedder or a distiller is first used.
"""

from importlib.metadata import version

__version__ = version("mtl-mcp")
__all__ = ["__version__"]
