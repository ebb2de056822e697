"""Every error mtl-mcp raises on purpose, in one tree.

Each message says what went wrong and what to do about it. Foreign errors are translated at
one boundary each, by a table: LanceDB's in `mtl_mcp.storage.lance`, onnxruntime's in
`mtl_mcp.index.embedder`, the Anthropic SDK's in `mtl_mcp.learning.backends.anthropic_api`,
an OpenAI-compatible server's HTTP errors in `learning.backends.openai_compat`;
the assistant CLIs' exit codes and output in `learning.backends.claude_code` and `.codex`;
answers from MCP sampling in `learning.backends.sampling`.
The front doors translate ours once more: ToolError in the MCP server, ClickException in
the CLI, a log line in hooks.

    MtlError
    ├── ConfigError            bad settings, config file or environment
    ├── InputError             an argument or an input file is malformed
    ├── StoreError             the store cannot be opened, read or written
    │   ├── NotFoundError      no insight has the requested id
    │   ├── StoreDamaged       the store's files are damaged: `mtl-mcp doctor` names a backup
    │   ├── StoreReadOnly      the data directory or store cannot be written (reads still work)
    │   ├── StoreBusy *        a write kept conflicting with other writers
    │   └── StoreUnavailable * the object store could not be reached, or did not answer in time
    ├── EmbeddingError         the embedding model is missing, corrupt or mismatched
    ├── TranscriptError        a transcript cannot be read at all
    └── DistillError           distillation failed or returned nothing usable
        ├── BudgetTooSmall     one run needs more tokens than the whole daily budget
        ├── BudgetExceeded *   today's token budget is spent (retry_at: next UTC midnight)
        ├── DistillUnavailable *  the model could not be reached, was busy, or its CLI failed,
        │                         timed out or is not logged in; another distillation runs;
        │                         a local model's answer stayed unusable after a repair round
        └── UnusableOutput     the model answered, but not in the requested shape

    * also a `Retryable`: the same call may succeed later without any change. `retry_at`
      says when, if the error knows (a budget resets at midnight); None means "back off".
"""

from __future__ import annotations

from datetime import datetime


class MtlError(Exception):
    """Base class of every error mtl-mcp raises on purpose."""


class Retryable(MtlError):
    """An error that may go away by itself: retry later, at `retry_at` if it is set."""

    def __init__(self, message: str, *, retry_at: datetime | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class ConfigError(MtlError):
    """Settings, the config file or the environment are invalid."""


class InputError(MtlError):
    """An argument or an input file is malformed."""


class StoreError(MtlError):
    """The insight store cannot be opened, read or written."""


class NotFoundError(StoreError):
    """No insight has the requested id."""


class StoreDamaged(StoreError):
    """The store's files are damaged; `mtl-mcp doctor` says which backup restores them."""


class StoreReadOnly(StoreError):
    """The data directory or the store is read-only, or not writable by this user: reading
    it works, changing it cannot (a locked-down machine, a team directory mounted
    read-only). Nothing is damaged."""


class StoreBusy(StoreError, Retryable):
    """A write kept conflicting with other writers' commits; retrying later helps."""


class StoreUnavailable(StoreError, Retryable):
    """A store on object storage could not be reached or timed out (network, endpoint or
    service down); nothing changed, and the same call may succeed once it is back."""


class EmbeddingError(MtlError):
    """The embedding model is missing, corrupt, or not the one the store was built with."""


class TranscriptError(MtlError):
    """A transcript cannot be read at all (individual bad lines are skipped, not raised)."""


class DistillError(MtlError):
    """Distillation failed: no credentials, model unreachable, budget spent, or no usable
    output."""


class BudgetTooSmall(DistillError):
    """One distillation run needs more tokens than the whole daily budget allows."""


class BudgetExceeded(DistillError, Retryable):
    """Today's token budget cannot cover the next run; it resets at `retry_at`."""


class DistillUnavailable(DistillError, Retryable):
    """The model could not be reached, timed out, or was rate limited or overloaded; or the
    assistant CLI that reaches it failed, hung or is not logged in; or another distillation
    holds the user's one slot."""


class UnusableOutput(DistillError):
    """The model answered, but not with output matching the schema. Not retried: the same
    input would most likely fail the same way, and every attempt costs tokens."""
