"""Errors raised by mtl-mcp's library code.

Every message says what went wrong and what to do about it. The front doors translate
them once: ToolError in the MCP server, ClickException in the CLI, a log line in hooks.

    MtlError
    ├── ConfigError       bad settings, config file or environment
    ├── StoreError        the LanceDB store cannot be opened, read or written
    │   └── NotFoundError no insight has the requested id
    ├── EmbeddingError    the embedding model is missing, corrupt or mismatched
    ├── InputError        an argument or input file is malformed
    ├── TranscriptError   a transcript cannot be read at all
    └── DistillError      the distillation request failed or returned nothing usable
"""


class MtlError(Exception):
    """Base class of every error mtl-mcp raises on purpose."""


class ConfigError(MtlError):
    """Settings, the config file or the environment are invalid."""


class StoreError(MtlError):
    """The insight store cannot be opened, read or written."""


class NotFoundError(StoreError):
    """No insight has the requested id."""


class EmbeddingError(MtlError):
    """The embedding model is missing, corrupt, or not the one the store was built with."""


class InputError(MtlError):
    """An argument or an input file is malformed."""


class TranscriptError(MtlError):
    """A transcript cannot be read at all (individual bad lines are skipped, not raised)."""


class DistillError(MtlError):
    """Distillation failed: no API key, API unreachable, or no usable output."""
