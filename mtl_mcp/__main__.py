from mtl_mcp.cli import cli

cli()
