"""The arms' memories: each a data directory of its own under the trial's folder, frozen.

    none     no data directory: no MCP server, no hooks
    memory   the user's memory as it is now: a copy of the store (and the ledger its
             feedback ranks with), never the store itself
    placebo  as many notes as the memory beside it, each as long as one of its notes,
             from domains no coding task touches (`trials.placebo`)
    --protocol transfer: `memory` is built per scored domain from the suite's training
             material (the starter-pack lessons the *other* domains' tasks name), and
             `placebo` matches each of those pools

Every arm directory's config.toml freezes it: `read_only` (every write to the insights is
refused), `distill_backend = "off"` (sessions are queued, never distilled or judged),
`starter = false`, no team pool; the user's other recall settings are carried over, so it
recalls as the user's own memory does. Each runs its own service, warmed before the
first session and stopped when the trial ends.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mtl_mcp.config import Settings, load_settings
from mtl_mcp.errors import InputError
from mtl_mcp.operations.service import stop_services
from mtl_mcp.schemas import Insight, InsightDraft
from mtl_mcp.storage.ledger import LEDGER_FILE
from mtl_mcp.storage.locks import store_lock
from mtl_mcp.text.starter import starter_drafts
from mtl_mcp.trials.placebo import Shape, placebo_notes
from mtl_mcp.trials.suite import Suite, Task

ARMS = ("none", "memory", "placebo")
READY = ".ready"  # written last: an arm directory without it is rebuilt
# Settings an arm's memory never takes from the user's: where the memory is, its secrets,
# distillation (off), and how processes run. Every other setting is carried over.
NOT_CARRIED = frozenset(
    {
        "home", "store_uri", "storage", "team_uri", "team_member", "anthropic_api_key",
        "openai_api_key", "openai_base_url", "openai_model", "openai_context_tokens",
        "openai_timeout", "local_daily_tokens", "distill_backend", "distill_model",
        "digest_tokens", "daily_token_budget", "subscription_daily_tokens", "claude_command",
        "claude_code_model", "codex_command", "codex_model", "cli_timeout", "service",
        "service_idle_seconds", "read_only", "starter",
    }
)  # fmt: skip
# An arm's memory is frozen: no distilling, and no idle consolidation (refused every minute).
FROZEN = {
    "read_only": True,
    "distill_backend": "off",
    "starter": False,
    "service": True,
    "consolidate_idle_seconds": 0,
}


@dataclass(frozen=True)
class ArmStore:
    """One arm's data directory, for one domain under the transfer protocol."""

    key: str  # "memory", "placebo", "memory.web-backend"
    home: Path


def store_key(arm: str, domain: str | None) -> str:
    return arm if domain is None else f"{arm}.{domain}"


def carried_settings(user: Settings) -> dict[str, Any]:
    """The user's settings an arm's memory keeps: those that change recall and the hooks."""
    defaults = Settings(home=user.home)
    return {
        f.name: getattr(user, f.name)
        for f in fields(Settings)
        if f.name not in NOT_CARRIED
        and getattr(user, f.name) is not None
        and getattr(user, f.name) != getattr(defaults, f.name)
    }


def _toml(values: Mapping[str, Any]) -> str:
    lines = []
    for key, value in values.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, int | float):
            lines.append(f"{key} = {value!r}")
        else:
            lines.append(f"{key} = {json.dumps(str(value))}")
    return "\n".join(lines) + "\n"


def arm_settings(home: Path, user: Settings, *, frozen: bool) -> Settings:
    """The settings of an arm's data directory (writable while it is being built)."""
    values = {**carried_settings(user), **FROZEN, "read_only": frozen}
    return load_settings(home, **values, store_uri=str(home / "store"), team_uri="")


def write_arm_config(home: Path, user: Settings) -> None:
    """The arm's config.toml: what the client's hooks and server read (their environment
    carries no MTL_MCP_ variable but MTL_MCP_HOME)."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    (home / "config.toml").write_text(_toml({**carried_settings(user), **FROZEN}), "utf-8")


# -- the user's memory -----------------------------------------------------------------------


def memory_hash(user: Settings) -> str:
    """A hash of every file of the user's store (names and bytes): equal before and after a
    trial when the trial wrote nothing into it."""
    digest = hashlib.sha256()
    store = user.local_store
    if store is None or not store.is_dir():
        return digest.hexdigest()
    for path in sorted(p for p in store.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(store)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def copy_memory(user: Settings, home: Path) -> None:
    """Copy the user's store (and ledger) into the arm directory `home`, read only: the
    store under its exclusive lock (no write is half-copied), the ledger through SQLite's
    backup of a read-only connection."""
    store = user.local_store
    if store is None:
        raise InputError(
            f"your memory is on object storage ({user.store_uri}): the memory arm copies a "
            "local store; run the trial with --protocol transfer, or --arms none,placebo"
        )
    if not store.is_dir():
        raise InputError(
            f"your memory at {store} is empty: there is nothing to measure yet; use mtl-mcp "
            "for a while, or run with --protocol transfer"
        )
    with store_lock(store, exclusive=True):
        shutil.copytree(store, home / "store", symlinks=False)
    ledger = user.home / LEDGER_FILE
    if ledger.is_file():
        source = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True)
        target = sqlite3.connect(home / LEDGER_FILE)
        try:
            source.backup(target)
        finally:
            source.close()
            target.close()
        os.chmod(home / LEDGER_FILE, 0o600)


def active_insights(settings: Settings) -> list[Insight]:
    from mtl_mcp.memory import Memory

    memory = Memory(settings)
    try:
        return [item for item in memory.export() if item.status == "active"]
    finally:
        memory.close()


def fill_store(settings: Settings, items: Sequence[Insight | InsightDraft]) -> None:
    from mtl_mcp.memory import Memory

    memory = Memory(settings)
    try:
        memory.import_insights(list(items))
    finally:
        memory.close()


def shapes_of(items: Sequence[Insight]) -> list[Shape]:
    return [
        Shape(len(i.title), len(i.description), len(i.content), i.category, i.polarity)
        for i in items
    ]


def transfer_pool(suite: Suite, scored_domain: str) -> list[InsightDraft]:
    """The training material for scoring `scored_domain`: the starter-pack lessons that the
    suite's tasks of every *other* domain name (`lessons`), each once."""
    named = {
        lesson for task in suite.tasks if task.domain != scored_domain for lesson in task.lessons
    }
    return [draft for draft in starter_drafts() if draft.title in named]


# -- building them ---------------------------------------------------------------------------


class ArmStores:
    """The arm directories of one trial, built once (a resumed trial reuses them)."""

    def __init__(
        self,
        root: Path,
        user: Settings,
        arms: Sequence[str],
        protocol: str,
        suite: Suite,
        seed: int,
    ) -> None:
        self.root = root
        self.user = user
        self.arms = [a for a in arms if a != "none"]
        self.protocol = protocol
        self.suite = suite
        self.seed = seed

    def domain_of(self, task: Task) -> str | None:
        return task.domain if self.protocol == "transfer" else None

    def folder_of(self, key: str) -> str:
        """An arm directory's name, short (the service's socket path lies under it):
        `m`, `p`, or under the transfer protocol `m3`, `p3` for the fourth domain."""
        arm, _, domain = key.partition(".")
        if not domain:
            return arm[0]
        return f"{arm[0]}{sorted({t.domain for t in self.suite.tasks}).index(domain)}"

    def home_of(self, key: str) -> Path:
        return self.root / self.folder_of(key)

    def store_for(self, arm: str, task: Task) -> ArmStore | None:
        if arm == "none":
            return None
        key = store_key(arm, self.domain_of(task))
        return ArmStore(key, self.home_of(key))

    def needed(self, tasks: Sequence[Task]) -> list[tuple[str, str | None]]:
        wanted = {(arm, self.domain_of(t)) for arm in self.arms for t in tasks}
        # A placebo copies the shape of the memory beside it: that one is built first (even
        # when the memory arm itself is not run).
        wanted |= {("memory", domain) for arm, domain in wanted if arm == "placebo"}
        return sorted(wanted, key=lambda pair: (pair[1] or "", pair[0] != "memory"))

    def build(self, tasks: Sequence[Task]) -> dict[str, int]:
        """Build every arm directory the tasks need (those already complete are kept);
        the number of active notes in each."""
        counts: dict[str, int] = {}
        shapes: dict[str | None, list[Shape]] = {}
        for arm, domain in self.needed(tasks):
            home = self.home_of(store_key(arm, domain))
            if not (home / READY).is_file():
                shutil.rmtree(home, ignore_errors=True)
                home.mkdir(parents=True, mode=0o700)
                self._build_one(arm, domain, home, shapes)
            elif arm == "memory":
                shapes[domain] = shapes_of(
                    active_insights(arm_settings(home, self.user, frozen=True))
                )
            counts[store_key(arm, domain)] = int((home / READY).read_text() or 0)
        return counts

    def _build_one(
        self, arm: str, domain: str | None, home: Path, shapes: dict[str | None, list[Shape]]
    ) -> None:
        writable = arm_settings(home, self.user, frozen=False)
        if arm == "memory" and domain is None:
            copy_memory(self.user, home)
        elif arm == "memory":
            pool = transfer_pool(self.suite, domain or "")
            if not pool:
                raise InputError(
                    f"the suite's tasks outside {domain} name no starter lessons (`lessons` in "
                    "task.toml): --protocol transfer has nothing to build that memory from"
                )
            fill_store(writable, pool)
        else:  # placebo: the shape of the memory beside it (the user's, or this domain's)
            fill_store(writable, placebo_notes(shapes[domain], self.seed))
        frozen = arm_settings(home, self.user, frozen=True)
        items = active_insights(frozen)
        if arm == "memory":
            shapes[domain] = shapes_of(items)
        write_arm_config(home, self.user)
        (home / READY).write_text(str(len(items)), encoding="utf-8")

    # -- services ----------------------------------------------------------------------------

    def warm(self, store: ArmStore, env: Mapping[str, str]) -> None:
        """Start the arm's service with the sessions' own environment (so their hooks and
        servers find it: the environment is part of its identity) and load its model, so
        that no session pays for a cold start."""
        exe = Path(sys.executable).parent / "mtl-mcp"
        argv = [str(exe)] if exe.is_file() else [sys.executable, "-m", "mtl_mcp"]
        env = {**env, "MTL_MCP_HOME": str(store.home), "HOME": str(store.home)}
        for args in (["serve"], ["recall", "warm up the trial's memory"]):
            subprocess.run(
                [*argv, *args],
                env=env,
                cwd=store.home,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=120,
                check=False,
            )

    def homes(self) -> list[Path]:
        """The arm directories that exist now."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and (p / "config.toml").exists())

    def stop(self) -> None:
        """Stop every arm's service (their recalls are flushed to their ledgers)."""
        for home in self.homes():
            stop_services(home)

    def remove(self) -> None:
        """Remove the arms' copies (a complete trial's report no longer needs them)."""
        from mtl_mcp.trials.records import remove_tree

        for home in self.homes():
            remove_tree(home)
