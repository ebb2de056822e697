"""`mtl-mcp trial`: the paper's experiment on the user's own assistant.

`suite` loads a task suite (the built-in one in `mtl_mcp/data/trials/builtin`, or any folder
in the same format), prepares a fresh work dir per run, runs the hidden verifier after the
session and checks that a suite can tell a right fix from a plausible wrong one.
"""
