"""Settings: command-line flag > environment variable > `<home>/config.toml` > default."""

from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import sys
import time
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

from mtl_mcp.errors import ConfigError

DEFAULT_EMBED_MODEL = "mtl-mcp/all-MiniLM-L6-v2-int8-r2"
# The default model's runtime before 0.4 (its vectors differ by up to 4e-4 in cosine): a
# store it made is re-embedded in the background on upgrade (`memory.upgrade`).
PREVIOUS_EMBED_MODEL = "mtl-mcp/all-MiniLM-L6-v2-int8"
DEFAULT_DISTILL_MODEL = "claude-haiku-5-5"
HOME_ENV = "MTL_MCP_HOME"
# The relevance gate's threshold for what is put before a model unasked: the one
# `bench/relevance_floor.py --fit` chooses on the dev split (a test checks they agree).
AUTO_RECALL_MIN_P = 0.45

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
    # Plan-triggered recall (the tool-use hook): on or off, and how long the hook may take.
    plan_recall: bool = field(default=True, metadata={"env": "MTL_MCP_PLAN_RECALL"})
    # The relevance gate's probability a note must reach to be put before a model unasked
    # (the plan hook, the session-start context; one note a plan at most): chosen on the dev
    # split by bench/relevance_floor.py. A recall the model asks for keeps its top k.
    auto_recall_min_p: float = field(
        default=AUTO_RECALL_MIN_P, metadata={"env": "MTL_MCP_AUTO_RECALL_MIN_P"}
    )
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
    # A frozen memory (a trial's snapshot): reads work, every write to the insights is
    # refused with StoreReadOnly. The ledger and the queue stay writable.
    read_only: bool = field(default=False, metadata={"env": "MTL_MCP_READ_ONLY"})

    def __post_init__(self) -> None:
        _check_types(self)
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
        if not 0 < self.service_idle_seconds <= _YEAR:
            raise ConfigError(
                f"service_idle_seconds {self.service_idle_seconds} is out of range: the "
                "service exits after that long with no window, more than 0 and at most "
                "31536000 s (default 600)"
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
        if not 0 < self.cli_timeout <= _DAY:
            raise ConfigError(
                f"cli_timeout {self.cli_timeout} is out of range: use a number of seconds, "
                "more than 0 and at most 86400 (default 180)"
            )
        if not 0.05 <= self.hook_budget_seconds <= 30:
            raise ConfigError(
                f"hook_budget_seconds {self.hook_budget_seconds} is out of range: a hook may "
                "take 0.05 to 30 s before it gives up and returns nothing (default 0.8)"
            )
        if not 0.0 <= self.auto_recall_min_p <= 1.0:
            raise ConfigError(
                f"auto_recall_min_p {self.auto_recall_min_p} is out of range: a probability "
                f"between 0 and 1 (default {AUTO_RECALL_MIN_P}; 1 puts nothing before a model "
                "unasked)"
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
        if not 0 < self.openai_timeout <= _DAY:
            raise ConfigError(
                f"openai_timeout {self.openai_timeout} is out of range: use a number of "
                "seconds, more than 0 and at most 86400 (default 300)"
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


_DAY = 86_400.0
_YEAR = 365 * _DAY


def _check_types(settings: Settings) -> None:
    """Every setting of the type its field declares, and every number finite, however the
    Settings were made (the config file and the environment are checked earlier, with the
    place they were set named; this also holds for flags and for library callers)."""
    for spec in fields(settings):
        value = getattr(settings, spec.name)
        kind = str(spec.type)
        if kind == "float":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            if not (ok and math.isfinite(value)):
                raise ConfigError(f"{spec.name} {value!r} is not a finite number: use e.g. 1.5")
        elif kind in ("int", "int | None"):
            if not (isinstance(value, int) and not isinstance(value, bool)) and not (
                value is None and kind == "int | None"
            ):
                raise ConfigError(f"{spec.name} {value!r} is not a whole number: use e.g. 1000")
        elif kind == "bool" and not isinstance(value, bool):
            raise ConfigError(f"{spec.name} {value!r} is not true or false")


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


# What each kind of setting takes, in words, for an error message.
_TAKES = {
    "bool": "true or false",
    "int": "a whole number",
    "int | None": "a whole number",
    "float": "a number",
}
_BOOL_WORDS = {"1": True, "true": True, "yes": True, "on": True}
_BOOL_WORDS |= {"0": False, "false": False, "no": False, "off": False}


# A TOML value's kind, in words (bool first: it is an int too).
_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "true or false"),
    (int, "a whole number"),
    (float, "a decimal number"),
    (str, "text"),
    (list, "a list"),
    (dict, "a table"),
)


def _kind_of(value: Any) -> str:
    """What a TOML value is, in words."""
    return next((words for kind, words in _KINDS if isinstance(value, kind)), "a date or time")


def _parse(raw: Any, target: str) -> Any:
    """`raw` (the environment's text, or a TOML value) as a value of the field's type
    `target`; ValueError if it is not one. Text parses as the environment's does."""
    if isinstance(raw, str) and target != "str" and target in _TAKES:
        text = raw.strip()
        if target == "bool":
            if text.lower() not in _BOOL_WORDS:
                raise ValueError(raw)
            return _BOOL_WORDS[text.lower()]
        return int(text) if target != "float" else float(text)
    if target == "bool":
        if not isinstance(raw, bool):
            raise ValueError(raw)
        return raw
    if target in ("int", "int | None"):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError(raw)
        return raw
    if target == "float":
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ValueError(raw)
        return float(raw)
    if not isinstance(raw, str):  # every other setting is text
        raise ValueError(raw)
    return raw


def _coerce(name: str, raw: Any, target: str, source: str) -> Any:
    """A setting's value from the environment variable `source` (text) or from the config
    file at `source` (a TOML value), as the field's type; ConfigError naming the setting,
    where it is set and the fix."""
    takes = _TAKES.get(target, "text")
    try:
        value = _parse(raw, target)
        if isinstance(value, float) and not math.isfinite(value):
            takes = "a finite number"
            raise ValueError(raw)
    except (ValueError, OverflowError):
        example = _example(name)
        if source.endswith(".toml"):
            found = "not finite" if takes == "a finite number" else _kind_of(raw)
            raise ConfigError(
                f"{source}: {name} is {found} ({_shown(raw)}), but it takes {takes}: write e.g. "
                f"{name} = {example}, or remove the line for the default"
            ) from None
        raise ConfigError(
            f"{source}={raw!r} is not {takes}: set e.g. {source}={example.strip(chr(34))}, or "
            "unset it for the default"
        ) from None
    return value


def _shown(raw: Any) -> str:
    text = repr(raw)
    return text if len(text) <= 60 else text[:57] + "..."


def _example(name: str) -> str:
    """A valid value of setting `name`, written as in TOML: its default where it has one."""
    default = next(f.default for f in fields(Settings) if f.name == name)
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, int | float):
        return f"{default:g}" if isinstance(default, float) else str(default)
    if isinstance(default, str) and default:
        return f'"{default}"'
    return "100000" if name.endswith("tokens") else '"..."'


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
        except OSError as exc:
            raise ConfigError(
                f"cannot read {config_file} ({exc.strerror or exc}): make it readable by this "
                "user, or move it away for the defaults"
            ) from exc
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    known = {f.name: f for f in fields(Settings) if f.name != "home"}
    _retired_floor(config_file, file_values.pop(RETIRED_FLOOR, None))
    if unknown := set(file_values) - set(known):
        raise ConfigError(
            f"{config_file} has unknown settings {sorted(unknown)}; known: {sorted(known)}"
        )
    for name, spec in known.items():
        env = spec.metadata.get("env", "")
        env_value = os.environ.get(env)
        if overrides.get(name) is not None:
            values[name] = overrides[name]
        elif env_value not in (None, ""):
            values[name] = _coerce(name, env_value, str(spec.type), env)
            origins[name] = env
        elif name == "storage" and name in file_values:
            values[name] = _storage_options(config_file, file_values[name])
        elif name in file_values:
            values[name] = _coerce(name, file_values[name], str(spec.type), str(config_file))
            origins[name] = str(config_file)
    try:
        return Settings(home=home, **values)
    except ConfigError as exc:
        setting = str(exc).split(" ", 1)[0]
        if setting not in origins:
            raise
        raise ConfigError(f"{exc} (set in {origins[setting]})") from None


# 0.3's cosine floor for the plan hook, replaced by the relevance gate's probability: a
# cosine cannot be turned into one, so it is ignored with a warning that names the setting
# that took its place (an error would stop every hook and window of a working setup).
RETIRED_FLOOR = "plan_recall_floor"
RETIRED_FLOOR_ENV = "MTL_MCP_PLAN_RECALL_FLOOR"
_warned: set[str] = set()


def _retired_floor(config_file: Path, in_file: Any) -> None:
    where = [RETIRED_FLOOR_ENV] if os.environ.get(RETIRED_FLOOR_ENV) else []
    where += [f"{RETIRED_FLOOR} in {config_file}"] if in_file is not None else []
    for place in where:
        if place not in _warned:
            _warned.add(place)
            logging.getLogger(__name__).warning(
                "%s is ignored: the cosine floor is gone; what is put before a model unasked "
                "now needs the relevance gate's probability MTL_MCP_AUTO_RECALL_MIN_P "
                "(auto_recall_min_p, default %s). Remove %s.",
                place,
                AUTO_RECALL_MIN_P,
                place.split(" in ")[0],
            )


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
    """Hand back to the system the free pages glibc's heap and Arrow's pool (mimalloc) keep
    after a large, short-lived allocation: loading a snapshot or building its BM25 index
    allocates several times what it keeps, and a process that then only recalls never
    reuses them (at 100,000 insights, ~200 of a service's 764 MB). Under a millisecond on a
    tidy heap, tens of ms on a fragmented one: after a load or a build, never per recall.
    Arrow's pool gives back what the calling thread's heap holds (mimalloc's are per
    thread); glibc's trim covers every arena."""
    arrow = sys.modules.get("pyarrow")  # never imported here: only where Arrow allocated
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    _glibc_call("malloc_trim", 0)


# accept()'s errors when the process or the system is out of file descriptors or buffers.
OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def raise_open_files_limit(most: int = 1 << 16) -> None:
    """Raise this process's soft limit of open files to its hard limit (at most `most`): a
    service holds a connection per window, hook and dashboard tab, and 1,024 (a common
    default) is few. Where it cannot be raised, it stays as it was."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = most if hard == resource.RLIM_INFINITY else min(hard, most)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


class RareWarning:
    """A warning logged at most once per `seconds`, with how often it happened meanwhile:
    a flood of one trouble (refused connections) is a line a minute, not a full disk."""

    def __init__(self, log: logging.Logger, what: str, seconds: float = 60.0) -> None:
        self.log, self.what, self.seconds = log, what, seconds
        self.count = 0
        self.said = -seconds

    def note(self, detail: str = "") -> None:
        self.count += 1
        now = time.monotonic()
        if now - self.said >= self.seconds:
            self.log.warning(
                "%s%s: %d time(s) since the last such line (said at most every %.0f s)",
                self.what,
                detail,
                self.count,
                self.seconds,
            )
            self.said, self.count = now, 0


def _glibc_call(name: str, *args: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to tune
        getattr(ctypes.CDLL("libc.so.6"), name)(*args)
