"""Claude Code in a trial: `claude -p --output-format stream-json`, in a throwaway HOME whose
`.claude/.credentials.json` is a symlink to the user's (or whose API key comes from the
environment, as the user's does)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl_mcp.errors import InputError
from mtl_mcp.trials.clients.base import (
    ClientAdapter,
    SessionUsage,
    as_int,
    json_document,
    json_lines,
    link_login,
    read_json,
    tail,
    write_json,
)

# User settings a session needs to log in and pick the model as the user's own does; their
# `env` block is passed in the environment instead (it may hold a token).
CARRIED_SETTINGS = ("apiKeyHelper", "awsAuthRefresh", "awsCredentialExport", "forceLoginMethod",
                    "model", "otelHeadersHelper")  # fmt: skip
# The tools a headless session may use without asking: it works in a throwaway copy.
ALLOWED_TOOLS = "Bash,Read,Edit,MultiEdit,Write,Glob,Grep,NotebookEdit"


@dataclass
class ClaudeCodeClient(ClientAdapter):
    name = "claude-code"
    label = "Claude Code"
    default_command = "claude"
    install_hint = "install it with `npm install -g @anthropic-ai/claude-code`"
    login_fix = (
        "run `claude` and log in with /login (or `claude auth login`), or export ANTHROPIC_API_KEY"
    )

    @property
    def config_dir(self) -> Path:
        """The user's Claude Code folder (CLAUDE_CONFIG_DIR moves it)."""
        moved = self.environ.get("CLAUDE_CONFIG_DIR")
        return Path(moved) if moved else self.user_home / ".claude"

    @property
    def state_file(self) -> Path:
        moved = self.environ.get("CLAUDE_CONFIG_DIR")
        return Path(moved) / ".claude.json" if moved else self.user_home / ".claude.json"

    def check_login(self, home: Path, env: Mapping[str, str]) -> None:
        done = self.probe(["auth", "status"], home, env)
        state = json_document(done.stdout) or {}
        if done.returncode == 0 or state.get("apiProvider", "firstParty") != "firstParty":
            return
        raise InputError(
            f"Claude Code is not logged in, as a trial's session would run it "
            f"({tail(done.stdout or done.stderr, 120)}): {self.login_fix}"
        )

    def prepare_home(self, home: Path, workdir: Path, env: dict[str, str]) -> None:
        link_login(self.config_dir / ".credentials.json", home / ".claude" / ".credentials.json")
        settings = read_json(self.config_dir / "settings.json")
        carried = {key: settings[key] for key in CARRIED_SETTINGS if key in settings}
        if carried:
            write_json(home / ".claude" / "settings.json", carried)
        if isinstance(settings.get("env"), dict):
            for key, value in settings["env"].items():
                env.setdefault(str(key), str(value))
        state: dict[str, Any] = {"hasCompletedOnboarding": True}
        account = read_json(self.state_file).get("oauthAccount")
        if isinstance(account, dict):  # who is logged in (no token: those are in the link)
            state["oauthAccount"] = account
        write_json(home / ".claude.json", state)
        env.setdefault("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")

    def session_args(self, prompt: str, model: str | None) -> list[str]:
        args = ["-p", prompt, "--output-format", "stream-json", "--verbose",
                "--permission-mode", "acceptEdits", "--allowedTools", ALLOWED_TOOLS]  # fmt: skip
        return [*args, "--model", model] if model else args

    def parse(self, stdout: str, stderr: str) -> SessionUsage:
        usage = SessionUsage()
        result: dict[str, Any] | None = None
        for event in json_lines(stdout):
            kind = event.get("type")
            if kind == "system" and isinstance(event.get("session_id"), str):
                usage.session_id = event["session_id"]
            elif kind == "assistant":
                content = (event.get("message") or {}).get("content") or []
                usage.tool_calls += sum(
                    1 for b in content if isinstance(b, dict) and b.get("type") == "tool_use"
                )
            elif kind == "result":
                result = event
        if result is None:
            usage.error = f"Claude Code printed no result: {tail(stderr or stdout)}"
            return usage
        counts = result.get("usage") or {}
        usage.tokens_in = sum(
            as_int(counts.get(key))
            for key in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        usage.tokens_out = as_int(counts.get("output_tokens"))
        usage.turns = as_int(result.get("num_turns"))
        usage.session_id = result.get("session_id") or usage.session_id
        if result.get("is_error"):
            usage.error = f"Claude Code: {tail(str(result.get('result') or result.get('subtype')))}"
        return usage
