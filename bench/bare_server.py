"""The handshake baseline: a bare MCPServer with one tool, nothing else imported."""

from mcp.server.mcpserver import MCPServer

mcp = MCPServer("bare")


@mcp.tool()
def ping(text: str) -> str:
    """Echo the text."""
    return text


if __name__ == "__main__":
    mcp.run("stdio")
