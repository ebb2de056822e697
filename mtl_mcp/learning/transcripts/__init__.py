"""Session transcripts: defensive, bounded readers and the digest sent for distillation.

    read_transcript(path)   Claude Code JSONL, Codex rollout JSONL, agent trajectory JSON,
                            or plain text/Markdown -> Transcript (a bounded list of Events)
    build_digest(t)         Transcript -> Digest: a compact, redacted text for an LLM
    missing_conversation(p) why a file is no session worth distilling, from a bounded read
    not_text(p)             why a file that reads is no text transcript (binary, not UTF-8)

Modules: events (models and bounds), lines (bounded file access and format sniffing),
content (message blocks and tool inputs as text), readers and trajectory (one reader per
format), digest.
"""

from mtl_mcp.learning.transcripts.digest import Digest, build_digest
from mtl_mcp.learning.transcripts.events import Event, Format, Transcript
from mtl_mcp.learning.transcripts.lines import detect_format, missing_conversation, not_text
from mtl_mcp.learning.transcripts.readers import read_transcript

__all__ = [
    "Digest",
    "Event",
    "Format",
    "Transcript",
    "build_digest",
    "detect_format",
    "missing_conversation",
    "not_text",
    "read_transcript",
]
