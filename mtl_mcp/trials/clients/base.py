"""What every client adapter does, and the parts they share.

An adapter knows one assistant CLI: how to find it and check its login (up front, with the
fix), how to lay out a throwaway config home that reuses the user's login (a symlink to
the credential file, or the environment, never a copy), how to register mtl-mcp there with
the client's own installer, the command line of one headless session, and how to read
tokens, turns and tool calls from its JSON output.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from mtl_mcp.errors import ConfigError, InputError
from mtl_mcp.operations.install.plans import apply, plan_install
from mtl_mcp.operations.install.targets import Client, detect_launch

# The variables that would point a client, or mtl-mcp, at the user's own configuration:
# never passed to a trial's session (its HOME is the throwaway home instead).
SCRUBBED = frozenset(
    {
        "CLAUDE_CONFIG_DIR",
        "CLAUDE_PROJECT_DIR",
        "CLAUDE_CODE_SESSION_ID",
        "CODEX_HOME",
        "GEMINI_CLI_HOME",
        "GEMINI_PLANS_DIR",
        "COPILOT_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_STATE_HOME",
        "OPENCODE_CONFIG",
        "OPENCODE_CONFIG_DIR",
        "OPENCODE_CONFIG_CONTENT",
        "PWD",
        "OLDPWD",
    }
)
PROBE_TIMEOUT = 60.0


@dataclass
class SessionUsage:
    """What a session's output says about it."""

    tokens_in: int = 0
    tokens_out: int = 0
    turns: int = 0
    tool_calls: int = 0
    session_id: str | None = None
    error: str | None = None  # the client reported a failure (an API error, no login)


@dataclass
class ClientAdapter:
    """One assistant CLI. `command` overrides how it is started (a path, or a command line
    such as `node /path/to/gemini.js`); `user_home` is where the user's login lives."""

    name: ClassVar[Client]
    label: ClassVar[str]
    default_command: ClassVar[str]
    install_hint: ClassVar[str]
    login_fix: ClassVar[str]
    # Whether its sessions reach the memory through mtl-mcp's service (every real client:
    # the trial warms each arm's service before the first session).
    uses_service: ClassVar[bool] = True

    command: str | None = None
    user_home: Path = field(default_factory=Path.home)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))

    # -- finding it --------------------------------------------------------------------

    def argv0(self) -> list[str]:
        """The command that starts the client; InputError with the fix if it is missing."""
        words = shlex.split(self.command or self.default_command)
        if not words:
            raise InputError(f"the {self.label} command is empty: pass --command PATH")
        found = shutil.which(words[0], path=self.environ.get("PATH"))
        if found is None:
            raise InputError(
                f"{self.label} is not installed here (`{words[0]}` is not on PATH): "
                f"{self.install_hint}, or pass --command with its path"
            )
        return [found, *words[1:]]

    def probe(
        self, args: list[str], home: Path, env: Mapping[str, str]
    ) -> subprocess.CompletedProcess[str]:
        """Run the client quickly (`--version`, a login check) in the throwaway `home`."""
        try:
            return subprocess.run(
                [*self.argv0(), *args],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                env=dict(env),
                cwd=home,
                timeout=PROBE_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(
                f"{self.label} did not answer `{' '.join(args)}` ({exc}): check that it runs, "
                "or pass --command with its path"
            ) from None

    def version(self, home: Path, env: Mapping[str, str]) -> str:
        done = self.probe(["--version"], home, env)
        if done.returncode != 0:
            raise InputError(
                f"`{self.label} --version` failed (exit {done.returncode}: "
                f"{tail(done.stderr or done.stdout)}): {self.install_hint}"
            )
        return (done.stdout.strip().splitlines() or ["unknown version"])[0]

    def check_login(self, home: Path, env: Mapping[str, str]) -> None:
        """Raise InputError (the fix) unless a session in the throwaway `home` is logged in."""
        raise NotImplementedError

    # -- the throwaway home ------------------------------------------------------------

    def environment(self, home: Path, tmp: Path) -> dict[str, str]:
        """The session's environment: the user's, without anything that points at their
        own configuration or memory, with the throwaway HOME and TMPDIR."""
        env = {
            key: value
            for key, value in self.environ.items()
            if key not in SCRUBBED and not key.startswith("MTL_MCP_")
        }
        env |= {"HOME": str(home), "TMPDIR": str(tmp)}
        return env

    def prepare_home(self, home: Path, workdir: Path, env: dict[str, str]) -> None:
        """Lay out the throwaway home: the login reused, the user's model choice kept.
        `env` may gain variables (a login passed by environment, not by file)."""

    def install_memory(self, home: Path, workdir: Path, data_home: Path) -> None:
        """Register mtl-mcp (server and hooks) in the throwaway home, for the data
        directory `data_home`, with the client's own installer. Every file it would write
        must be inside `home`: anything else is refused before a byte is written."""
        launch = detect_launch({"MTL_MCP_HOME": str(data_home)})
        with _installer_environment():
            plan = plan_install(
                self.name,
                "user",
                launch,
                user_home=home,
                project_dir=workdir,
                hooks=True,
                trust_hooks=self.name == "codex",
            )
        outside = [c.path for c in plan.changes if not _inside(c.path, home)]
        if outside:
            raise ConfigError(
                f"installing {self.label} for a trial would write {outside[0]}, outside its "
                "throwaway home: nothing was written (unset the variable that moves its config)"
            )
        apply(plan)

    # -- one session -------------------------------------------------------------------

    def session_args(self, prompt: str, model: str | None) -> list[str]:
        raise NotImplementedError

    def parse(self, stdout: str, stderr: str) -> SessionUsage:
        raise NotImplementedError


def _inside(path: Path, root: Path) -> bool:
    try:
        return path.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


class _installer_environment:
    """The installers read a few variables that move a client's config (GEMINI_CLI_HOME,
    XDG_CONFIG_HOME, COPILOT_HOME): while planning for a throwaway home they are unset, so
    the plan lands in it. Restored afterwards."""

    MOVERS = ("GEMINI_CLI_HOME", "XDG_CONFIG_HOME", "COPILOT_HOME", "APPDATA")

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}

    def __enter__(self) -> None:
        for name in self.MOVERS:
            if name in os.environ:
                self.saved[name] = os.environ.pop(name)

    def __exit__(self, *exc: object) -> None:
        os.environ.update(self.saved)


def link_login(source: Path, target: Path) -> bool:
    """Make `target` a symlink to the user's credential file `source`, if it exists: the
    session logs in as the user does, and no copy of the secret is ever made."""
    if not source.is_file():
        return False
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    target.unlink(missing_ok=True)
    target.symlink_to(source.resolve())
    return True


def read_json(path: Path) -> dict[str, Any]:
    """A user's JSON config file, or {} if it is missing or unreadable (it only informs
    what the throwaway home carries over)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL output, other lines skipped."""
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def json_document(text: str) -> dict[str, Any] | None:
    """The one JSON object a client printed (after any banner lines), or None."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except ValueError:
            start = text.find("\n{", start + 1)
            start = start + 1 if start != -1 else -1
            continue
        return value if isinstance(value, dict) else None
    return None


def as_int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def tail(text: str, limit: int = 300) -> str:
    """The last `limit` characters of a client's output, on one line (for an error)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else "…" + text[-limit:]
