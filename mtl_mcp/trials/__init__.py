"""`mtl-mcp trial`: the paper's experiment on the user's own assistant.

`suite` loads a task suite (the built-in one in `mtl_mcp/data/trials/builtin`, or any folder
in the same format), prepares a fresh work dir per run, runs the hidden verifier after the
session and checks that a suite can tell a right fix from a plausible wrong one.

The harness around it:

plan     the tasks, their order and the arms' rotation (a Latin square); the estimate
arms     the arms' memories: a frozen copy of the user's, a placebo, transfer pools
placebo  notes of the same count and length from domains no coding task touches
clients  one adapter per assistant CLI: login reuse, throwaway home, its JSON output
runner   one session after another: fresh work dir, time limit, verifier, budget, Ctrl-C
records  a trial on disk: its spec and state, the ledger of its runs
stats    Wilson intervals, the exact McNemar test, a bootstrap ratio interval
report   the report's JSON and text; html, the same as one self-contained page
manage   planning, resuming and reporting trials: what the CLI and dashboard call
"""
