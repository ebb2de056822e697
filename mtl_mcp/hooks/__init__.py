"""The hooks front door: what the assistants' hooks run (`mtl-mcp hook <event>`).

session   session-end spools the ended session; session-start prints the context
tool_use  after each tool call: recall for the plan the model stated (lean, no heavy import)
plans     what counts as a plan, read from a tool call or the transcript's tail (pure)

Importing this package imports nothing: the tool-use hook runs after every tool call and
must start in a few tens of milliseconds.
"""
