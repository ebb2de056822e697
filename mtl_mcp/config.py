"""Settings: command-line flag > environment variable > `<home>/config.toml` > default."""

from __future__ import annotations

import contextlib
import os
import sys
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from mtl_mcp.errors import ConfigError

DEFAULT_EMBED_MODEL = "mtl-mcp/all-MiniLM-L6-v2-int8"
DEFAULT_DISTILL_MODEL = "claude-haiku-5-5"
HOME_ENV = "MTL_MCP_HOME"

# Where distillation's model calls go: `auto` decides per session (README, "Which model
# distils your sessions"); `off` distils nothing and leaves every job queued.
DistillBackendName = Literal["auto", "openai", "anthropic", "claude-code", "codex", "off"]
DISTILL_BACKENDS: tuple[DistillBackendName, ...] = get_args(DistillBackendName)


@dataclass(frozen=True)
class Settings:
    """Everything configurable. Each field's metadata names its environment variable."""

    home: Path
    store_uri: str = field(default="", metadata={"env": "MTL_MCP_STORE_URI"})
    # Options for a store on object storage, passed to LanceDB as `storage_options`: the
    # config file's [storage] table only (credentials may sit there: never shown).
    storage: dict[str, str] = field(default_factory=dict, repr=False)
    team_uri: str = field(default="", metadata={"env": "MTL_MCP_TEAM_URI"})
    team_member: str = field(default="", repr=False, metadata={"env": "MTL_MCP_TEAM_MEMBER"})
    refresh_seconds: float = field(default=10.0, metadata={"env": "MTL_MCP_REFRESH_SECONDS"})
    embed_model: str = field(default=DEFAULT_EMBED_MODEL, metadata={"env": "MTL_MCP_EMBED_MODEL"})
    dedup_threshold: float = field(default=0.92, metadata={"env": "MTL_MCP_DEDUP_THRESHOLD"})
    starter: bool = field(default=True, metadata={"env": "MTL_MCP_STARTER"})
    retire_after_harmful: int = field(default=3, metadata={"env": "MTL_MCP_RETIRE_AFTER_HARMFUL"})
    # Consolidation (`mtl-mcp consolidate`, and the service when idle): a lesson no session
    # recalled or confirmed in this many days is retired (0: never); the service runs a pass
    # after this long with no request, at most once every `consolidate_every_hours` (the
    # simulated year, bench/year.py, chose the default: docs/memory-health.md).
    retire_unused_days: int = field(default=180, metadata={"env": "MTL_MCP_RETIRE_UNUSED_DAYS"})
    consolidate_idle_seconds: float = field(
        default=300.0, metadata={"env": "MTL_MCP_CONSOLIDATE_IDLE_SECONDS"}
    )
    consolidate_every_hours: float = field(
        default=24.0, metadata={"env": "MTL_MCP_CONSOLIDATE_EVERY_HOURS"}
    )
    distill_model: str = field(
        default=DEFAULT_DISTILL_MODEL, metadata={"env": "MTL_MCP_DISTILL_MODEL"}
    )
    anthropic_api_key: str | None = field(
        default=None, repr=False, metadata={"env": "ANTHROPIC_API_KEY"}
    )
    digest_tokens: int = field(default=6000, metadata={"env": "MTL_MCP_DIGEST_TOKENS"})
    daily_token_budget: int = field(default=300_000, metadata={"env": "MTL_MCP_DAILY_TOKENS"})
    service: bool = field(default=True, metadata={"env": "MTL_MCP_SERVICE"})
    service_idle_seconds: float = field(
        default=600.0, metadata={"env": "MTL_MCP_SERVICE_IDLE_SECONDS"}
    )
    distill_backend: DistillBackendName = field(
        default="auto", metadata={"env": "MTL_MCP_DISTILL_BACKEND"}
    )
    subscription_daily_tokens: int = field(
        default=100_000, metadata={"env": "MTL_MCP_SUBSCRIPTION_DAILY_TOKENS"}
    )
    claude_command: str = field(default="claude", metadata={"env": "MTL_MCP_CLAUDE_COMMAND"})
    claude_code_model: str = field(default="haiku", metadata={"env": "MTL_MCP_CLAUDE_CODE_MODEL"})
    codex_command: str = field(default="codex", metadata={"env": "MTL_MCP_CODEX_COMMAND"})
    codex_model: str = field(default="gpt-6-luna", metadata={"env": "MTL_MCP_CODEX_MODEL"})
    cli_timeout: float = field(default=180.0, metadata={"env": "MTL_MCP_CLI_TIMEOUT"})
    # Plan-triggered recall (the tool-use hook): on or off, the relevance floor a note must
    # reach (bench/relevance_floor.py chose it), and how long the hook may take.
    plan_recall: bool = field(default=True, metadata={"env": "MTL_MCP_PLAN_RECALL"})
    plan_recall_floor: float = field(default=0.40, metadata={"env": "MTL_MCP_PLAN_RECALL_FLOOR"})
    # 0.8 s of the hook's own work: with the process start, it stays under a second.
    hook_budget_seconds: float = field(default=0.8, metadata={"env": "MTL_MCP_HOOK_BUDGET_SECONDS"})
    # An OpenAI-compatible chat-completions endpoint (Ollama, LM Studio, llama.cpp, vLLM, a
    # gateway): `auto` uses it whenever the base URL is set.
    openai_base_url: str = field(default="", metadata={"env": "MTL_MCP_OPENAI_BASE_URL"})
    openai_model: str = field(default="", metadata={"env": "MTL_MCP_OPENAI_MODEL"})
    openai_api_key: str | None = field(
        default=None, repr=False, metadata={"env": "MTL_MCP_OPENAI_API_KEY"}
    )
    openai_context_tokens: int = field(
        default=8192, metadata={"env": "MTL_MCP_OPENAI_CONTEXT_TOKENS"}
    )
    openai_timeout: float = field(default=300.0, metadata={"env": "MTL_MCP_OPENAI_TIMEOUT"})
    # A model on this machine's loopback costs neither money nor quota: unset = no limit.
    local_daily_tokens: int | None = field(
        default=None, metadata={"env": "MTL_MCP_LOCAL_DAILY_TOKENS"}
    )

    def __post_init__(self) -> None:
        if not self.store_uri:
            object.__setattr__(self, "store_uri", str(self.home / "store"))
        if self.digest_tokens < 200:
            raise ConfigError(
                f"digest_tokens {self.digest_tokens} is too small to describe a session: "
                "use at least 200 (default 6000)"
            )
        if not 0.1 <= self.refresh_seconds <= 3600:
            raise ConfigError(
                f"refresh_seconds {self.refresh_seconds} is out of range: check a store on "
                "object storage for other machines' writes every 0.1 to 3600 s (default 10)"
            )
        if self.service_idle_seconds <= 0:
            raise ConfigError(
                f"service_idle_seconds {self.service_idle_seconds} must be positive: the "
                "service exits after that long with no window (default 600)"
            )
        if self.distill_backend not in DISTILL_BACKENDS:
            raise ConfigError(
                f"distill_backend {self.distill_backend!r} is unknown: use one of "
                f"{', '.join(DISTILL_BACKENDS)} (MTL_MCP_DISTILL_BACKEND)"
            )
        if self.subscription_daily_tokens < 0:
            raise ConfigError(
                f"subscription_daily_tokens {self.subscription_daily_tokens} is negative: use 0 "
                "(never spend a subscription) or a number of tokens (default 100000)"
            )
        if self.cli_timeout <= 0:
            raise ConfigError(
                f"cli_timeout {self.cli_timeout} is not a number of seconds: use e.g. 180"
            )
        if not 0.05 <= self.hook_budget_seconds <= 30:
            raise ConfigError(
                f"hook_budget_seconds {self.hook_budget_seconds} is out of range: a hook may "
                "take 0.05 to 30 s before it gives up and returns nothing (default 0.8)"
            )
        if not -1.0 <= self.plan_recall_floor <= 2.0:
            raise ConfigError(
                f"plan_recall_floor {self.plan_recall_floor} is out of range: a score between "
                "-1 and 2 (default 0.4)"
            )
        if self.openai_base_url and not self.openai_base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"openai_base_url {self.openai_base_url!r} is not an http(s) URL: use e.g. "
                "http://127.0.0.1:11434/v1 (Ollama) or http://127.0.0.1:8080/v1 (llama.cpp)"
            )
        if self.openai_context_tokens < 1024:
            raise ConfigError(
                f"openai_context_tokens {self.openai_context_tokens} is too small for a "
                "session: use the model's context window, at least 1024 (default 8192)"
            )
        if self.openai_timeout <= 0:
            raise ConfigError(
                f"openai_timeout {self.openai_timeout} is not a number of seconds: use e.g. 300"
            )
        if self.local_daily_tokens is not None and self.local_daily_tokens < 0:
            raise ConfigError(
                f"local_daily_tokens {self.local_daily_tokens} is negative: unset it (no "
                "limit), or use 0 (never distil locally) or a number of tokens"
            )
        if self.retire_unused_days < 0:
            raise ConfigError(
                f"retire_unused_days {self.retire_unused_days} is negative: use 0 (never retire "
                "unused lessons) or a number of days (default 180)"
            )
        if self.consolidate_idle_seconds < 0 or self.consolidate_every_hours <= 0:
            raise ConfigError(
                "consolidate_idle_seconds must be 0 (the service never consolidates) or a "
                "number of seconds, and consolidate_every_hours a positive number of hours "
                "(defaults 300 and 24)"
            )
        if not 0.5 <= self.dedup_threshold <= 1.0:
            raise ConfigError(
                f"dedup_threshold {self.dedup_threshold} is out of range: use a cosine "
                "similarity between 0.5 and 1.0 (default 0.92)"
            )

    @property
    def local_store(self) -> Path | None:
        """The store's directory when it is on this machine; None for an object-store URI."""
        return local_path(self.store_uri)

    @property
    def team_outbox(self) -> Path:
        """Shares waiting for the team pool to be reachable (one file per insight id)."""
        return self.home / "team-outbox"

    @property
    def models_dir(self) -> Path:
        """Where embedding models are assembled or cached (never /tmp: it is wiped on reboot)."""
        return self.home / "models"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def config_file(self) -> Path:
        return self.home / "config.toml"


def local_path(uri: str) -> Path | None:
    """The directory a store URI names on this machine; None for an object-store URI
    (s3://, gs://, az://, ...)."""
    return None if "://" in uri else Path(uri)


def platform_home() -> Path:
    """The platform's user data directory for mtl-mcp."""
    from platformdirs import user_data_path

    return user_data_path("mtl-mcp", appauthor=False).resolve()


def default_home() -> Path:
    """$MTL_MCP_HOME, else the platform's user data directory."""
    if env := os.environ.get(HOME_ENV):
        return Path(env).expanduser()
    return platform_home()


def _coerce(name: str, raw: Any, target: Any) -> Any:
    """Turn a string from the environment or a TOML value into the field's type."""
    try:
        if target is bool or target == "bool":
            if isinstance(raw, bool):
                return raw
            lowered = str(raw).strip().lower()
            if lowered in {"1", "true", "yes", "on"}:
                return True
            if lowered in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if target in (int, "int", "int | None"):
            return int(raw)
        if target in (float, "float"):
            return float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a valid {target}: fix it or unset it") from None
    return str(raw)


def load_settings(home: Path | None = None, **overrides: Any) -> Settings:
    """Build Settings from flags (`home`, `overrides`), the environment and the config file."""
    home = (home or default_home()).expanduser().resolve()
    file_values: dict[str, Any] = {}
    config_file = home / "config.toml"
    if config_file.is_file():
        try:
            file_values = tomllib.loads(config_file.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{config_file} is not valid TOML ({exc}): fix or delete it") from exc
    values: dict[str, Any] = {}
    known = {f.name: f for f in fields(Settings) if f.name != "home"}
    if unknown := set(file_values) - set(known):
        raise ConfigError(
            f"{config_file} has unknown settings {sorted(unknown)}; known: {sorted(known)}"
        )
    for name, spec in known.items():
        env_value = os.environ.get(spec.metadata.get("env", ""))
        if overrides.get(name) is not None:
            values[name] = overrides[name]
        elif env_value not in (None, ""):
            values[name] = _coerce(spec.metadata["env"], env_value, spec.type)
        elif name == "storage" and name in file_values:
            values[name] = _storage_options(config_file, file_values[name])
        elif name in file_values:
            values[name] = _coerce(f"{config_file}:{name}", file_values[name], spec.type)
    return Settings(home=home, **values)


def _storage_options(config_file: Path, table: Any) -> dict[str, str]:
    """The [storage] table as LanceDB's storage_options: string keys, string values."""
    if not isinstance(table, dict) or any(isinstance(v, dict | list) for v in table.values()):
        raise ConfigError(
            f"{config_file}: [storage] must be a table of plain values, e.g. "
            'aws_endpoint = "http://minio.lan:9000" (see the README, "A team pool")'
        )
    return {
        str(key): str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in table.items()
    }


PRIVATE_UMASK = 0o077


def private_umask() -> None:
    """Make every file and directory this process creates from now on owner-only.

    LanceDB writes its files from Rust with the process umask, which no `mode=` argument
    reaches: the front doors and the store call this before they write anything.
    """
    os.umask(os.umask(PRIVATE_UMASK) | PRIVATE_UMASK)


# glibc's mallopt parameter for the number of heap arenas (malloc.h: M_ARENA_MAX).
_M_ARENA_MAX = -8


def fewer_malloc_arenas() -> None:
    """Let glibc keep two heap arenas instead of up to eight per core: the threads of
    LanceDB and onnxruntime otherwise each hold freed memory in an arena of their own. A 4k
    import peaked ~50 MB lower, at the same speed. Call before the heavy work starts."""
    _glibc_call("mallopt", _M_ARENA_MAX, 2)


# glibc's mallopt parameter for the size from which a block is mapped on its own (malloc.h:
# M_MMAP_THRESHOLD); setting it also stops glibc raising it as big blocks are freed.
_M_MMAP_THRESHOLD = -3


def map_big_blocks_alone() -> None:
    """Have glibc map every block of 1 MB or more on its own, so that freeing it returns it
    to the system. By default the threshold rises to the largest block freed so far, and
    the dashboard's map (temporary arrays of 15 MB each at 10k insights, in a worker
    thread's arena) then left ~50 MB resident in the long-lived service."""
    _glibc_call("mallopt", _M_MMAP_THRESHOLD, 1 << 20)


def return_free_heap() -> None:
    """Hand the heap glibc keeps after freeing back to the system: ~40-55 MB in a service
    after the model, the snapshot and BM25 were built. For long-lived processes, once."""
    _glibc_call("malloc_trim", 0)


def _glibc_call(name: str, *args: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
        getattr(ctypes.CDLL("libc.so.6"), name)(*args)
