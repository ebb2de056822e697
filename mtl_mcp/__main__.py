from mtl_mcp.cli import main

main()
