"""The text layer: pure functions over the words of insights and sessions.

redact     secrets replaced before anything leaves the machine or is stored
poisoning  text that addresses the assistant instead of teaching
frames     markup that poses as a client's frame or a turn, and how to make it inert
lint       is a draft a transferable lesson? errors reject, warnings lower its score
polarity   success or failure, by a rule, when a draft left it out
starter    the starter pack shipped with mtl-mcp
render     insights as text for people and for the assistant's context
tokens     the one token estimate
cues       opposite advice and superseded flags between two similar lessons
"""
