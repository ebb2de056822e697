"""Codex's trust in the hooks `install codex` writes: which they are, and whether Codex runs them.

Codex (0.169+) runs a hook from a user's or project's `hooks.json` only once the user trusted
it: `[hooks.state."<key>"] trusted_hash = "sha256:..."` in the user's `config.toml` (`/hooks`
in Codex's TUI writes it). Without it `codex exec` skips the hook silently. The key is the
handler's place, `<hooks.json path>:<event_snake>:<group>:<handler>`; the hash is over its
definition, so editing the handler (or moving the executable) untrusts it. Both are computed
here the way Codex 0.171 computes them (`codex-rs/hooks/src/engine/discovery.rs`:
`command_hook_hash`, `codex-rs/config/src/fingerprint.rs`: `version_for_toml`), which the
end-to-end test checks against the real binary's own `hooks/list`.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mtl_mcp.errors import ConfigError
from mtl_mcp.operations.install.files import read_text
from mtl_mcp.operations.install.json_configs import CODEX_EVENTS, is_our_hook, load_json
from mtl_mcp.operations.install.targets import JsonDoc

TrustStatus = Literal["trusted", "untrusted", "modified", "disabled"]
_CLAMPED = {"session_end": 3, "interrupt": 3}  # Codex clamps these (and hashes the result)
_DEFAULT_TIMEOUT = 600


def _snake(event: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def hook_key(source: Path, event: str, group: int, handler: int) -> str:
    return f"{source}:{_snake(event)}:{group}:{handler}"


def hook_hash(event: str, matcher: str | None, handler: JsonDoc) -> str:
    """Codex's `currentHash` of a command handler: sha256 over the compact, key-sorted JSON
    of the normalized identity (None fields dropped, as its TOML round trip drops them)."""
    name = _snake(event)
    timeout = handler.get("timeout", handler.get("timeoutSec"))
    timeout = max(int(timeout), 1) if isinstance(timeout, int) else _DEFAULT_TIMEOUT
    if name in _CLAMPED:
        timeout = min(timeout, _CLAMPED[name])
    normalized: JsonDoc = {
        "type": "command",
        "command": handler.get("command"),
        "timeout": timeout,
        "async": bool(handler.get("async", False)),
    }
    if isinstance(handler.get("statusMessage"), str):
        normalized["statusMessage"] = handler["statusMessage"]
    identity: JsonDoc = {"event_name": name, "hooks": [normalized]}
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class OurHook:
    """One of our handlers in a Codex hooks.json: its event, trust key and current hash."""

    event: str
    key: str
    hash: str


def our_hooks(hooks_file: Path, doc: JsonDoc) -> list[OurHook]:
    """Our handlers in `doc` (the content of `hooks_file`), where they are."""
    found: list[OurHook] = []
    events = doc.get("hooks")
    if not isinstance(events, dict):
        return found
    for event, (arg, _, _) in CODEX_EVENTS.items():
        groups = events.get(event)
        if not isinstance(groups, list):
            continue
        for g, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(handlers, list):
                continue
            matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
            for h, handler in enumerate(handlers):
                if isinstance(handler, dict) and is_our_hook(handler.get("command"), arg):
                    key = hook_key(hooks_file, event, g, h)
                    found.append(OurHook(event, key, hook_hash(event, matcher, handler)))
    return found


def hook_states(config_toml: Path) -> dict[str, Any]:
    """`hooks.state` of a Codex config.toml ({} when it has none or cannot be read)."""
    try:
        doc = tomllib.loads((read_text(config_toml) or "").removeprefix("\ufeff"))
    except (tomllib.TOMLDecodeError, ConfigError):
        return {}
    hooks = doc.get("hooks")
    states = hooks.get("state") if isinstance(hooks, dict) else None
    return states if isinstance(states, dict) else {}


def trust_status(hook: OurHook, states: dict[str, Any]) -> TrustStatus:
    state = states.get(hook.key)
    if not isinstance(state, dict):
        return "untrusted"
    if state.get("enabled") is False:
        return "disabled"
    trusted = state.get("trusted_hash")
    if trusted == hook.hash:
        return "trusted"
    return "modified" if isinstance(trusted, str) else "untrusted"


def installed_trust(hooks_file: Path, user_config: Path) -> list[tuple[OurHook, TrustStatus]]:
    """Our hooks in `hooks_file` as it is on disk, and whether Codex would run each."""
    try:
        doc = load_json(hooks_file, read_text(hooks_file))
    except ConfigError:  # a report: a file that cannot be read holds none of ours
        return []
    states = hook_states(user_config)
    return [(hook, trust_status(hook, states)) for hook in our_hooks(hooks_file, doc)]
