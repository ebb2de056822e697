"""Registering mtl-mcp in clients' config files (`mtl-mcp install` / `uninstall`).

targets       the clients, how they start mtl-mcp, which files they read
json_configs  edits to Claude Code, Cursor and Claude Desktop JSON files
codex_toml    edits to Codex's config.toml, as text
files         reading, backing up and atomically writing those files
plans         plan_install / plan_uninstall (read only) and apply (writes)
"""
