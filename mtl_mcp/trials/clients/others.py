"""Codex, opencode and Copilot CLI in a trial. Their throwaway homes reuse the login the
same way (a symlink to the credential file, or a token from the environment); their output
is read as each documents it. The end-to-end tests drive Claude Code and Gemini CLI: these
three are checked on their recorded output shapes only (docs/trials.md says so)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtl_mcp.errors import ConfigError, InputError
from mtl_mcp.operations.install.json_configs import load_json
from mtl_mcp.trials.clients.base import (
    ClientAdapter,
    SessionUsage,
    as_int,
    json_lines,
    link_login,
    tail,
)


@dataclass
class CodexClient(ClientAdapter):
    name = "codex"
    label = "Codex"
    default_command = "codex"
    install_hint = "install it with `npm install -g @openai/codex`"
    login_fix = "run `codex login`, or export OPENAI_API_KEY"

    @property
    def config_dir(self) -> Path:
        moved = self.environ.get("CODEX_HOME")
        return Path(moved) if moved else self.user_home / ".codex"

    def check_login(self, home: Path, env: Mapping[str, str]) -> None:
        done = self.probe(["login", "status"], home, env)
        if done.returncode != 0 and not env.get("OPENAI_API_KEY"):
            raise InputError(
                f"Codex is not logged in, as a trial's session would run it "
                f"({tail(done.stdout + done.stderr, 120)}): {self.login_fix}"
            )

    def prepare_home(self, home: Path, workdir: Path, env: dict[str, str]) -> None:
        link_login(self.config_dir / "auth.json", home / ".codex" / "auth.json")
        lines = []  # the model choice only: the installer adds the server, hooks and trust
        for line in _read(self.config_dir / "config.toml").splitlines():
            key = line.split("=", 1)[0].strip()
            if key in ("model", "model_provider", "model_reasoning_effort") and "=" in line:
                lines.append(line.strip())
            if line.lstrip().startswith("["):
                break  # keys after the first table belong to it
        if lines:
            (home / ".codex").mkdir(parents=True, exist_ok=True, mode=0o700)
            (home / ".codex" / "config.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def session_args(self, prompt: str, model: str | None) -> list[str]:
        args = ["exec", "--json", "--sandbox", "workspace-write", "--skip-git-repo-check"]
        return [*args, *(["-m", model] if model else []), prompt]

    def parse(self, stdout: str, stderr: str) -> SessionUsage:
        usage = SessionUsage()
        seen = False
        for event in json_lines(stdout):
            kind = event.get("type")
            seen = True
            if kind == "thread.started":
                usage.session_id = event.get("thread_id")
            elif kind == "turn.completed":
                counts = event.get("usage") or {}
                usage.tokens_in += as_int(counts.get("input_tokens"))
                usage.tokens_out += as_int(counts.get("output_tokens"))
            elif kind == "item.completed":
                item = (event.get("item") or {}).get("type")
                if item == "agent_message":
                    usage.turns += 1
                elif item in ("command_execution", "file_change", "mcp_tool_call", "web_search"):
                    usage.tool_calls += 1
            elif kind in ("turn.failed", "error"):
                error = event.get("error") or event.get("message")
                message = error.get("message") if isinstance(error, dict) else error
                usage.error = f"Codex: {tail(str(message))}"
        if not seen:
            usage.error = f"Codex printed no JSON events: {tail(stderr or stdout)}"
        return usage


PROVIDER_KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY")


@dataclass
class OpencodeClient(ClientAdapter):
    name = "opencode"
    label = "opencode"
    default_command = "opencode"
    install_hint = "install it with `npm install -g opencode-ai`"
    login_fix = "run `opencode auth login`, or export your provider's API key"

    def _xdg(self, variable: str, default: str) -> Path:
        moved = self.environ.get(variable)
        return Path(moved) if moved else self.user_home / default

    @property
    def auth_file(self) -> Path:
        return self._xdg("XDG_DATA_HOME", ".local/share") / "opencode" / "auth.json"

    def user_config(self) -> dict[str, Any]:
        folder = self._xdg("XDG_CONFIG_HOME", ".config") / "opencode"
        for name in ("opencode.json", "opencode.jsonc"):
            path = folder / name
            if path.is_file():
                try:
                    return load_json(path, _read(path), comments=True)
                except ConfigError:
                    return {}
        return {}

    def check_login(self, home: Path, env: Mapping[str, str]) -> None:
        if self.auth_file.is_file() or self.user_config().get("provider"):
            return
        if any(env.get(name) for name in PROVIDER_KEYS):
            return
        raise InputError(f"opencode has no login or provider configured: {self.login_fix}")

    def prepare_home(self, home: Path, workdir: Path, env: dict[str, str]) -> None:
        link_login(self.auth_file, home / ".local" / "share" / "opencode" / "auth.json")
        chosen = {
            k: v for k, v in self.user_config().items() if k in ("provider", "model", "small_model")
        }
        if chosen:  # in the environment, not a file: a provider's options may hold a key
            env["OPENCODE_CONFIG_CONTENT"] = json.dumps(chosen)
        env.setdefault("OPENCODE_DISABLE_AUTOUPDATE", "1")

    def session_args(self, prompt: str, model: str | None) -> list[str]:
        return ["run", "--format", "json", *(["--model", model] if model else []), prompt]

    def parse(self, stdout: str, stderr: str) -> SessionUsage:
        usage = SessionUsage()
        for event in json_lines(stdout):
            kind = event.get("type")
            part: dict[str, Any] = event["part"] if isinstance(event.get("part"), dict) else {}
            usage.session_id = usage.session_id or event.get("sessionID") or part.get("sessionID")
            if kind == "step_finish":
                tokens = part.get("tokens") or {}
                cache = tokens.get("cache") or {}
                usage.tokens_in += as_int(tokens.get("input")) + as_int(cache.get("read"))
                usage.tokens_out += as_int(tokens.get("output")) + as_int(tokens.get("reasoning"))
                usage.turns += 1
            elif kind == "tool_use":
                usage.tool_calls += 1
            elif kind == "error":
                usage.error = f"opencode: {tail(json.dumps(event.get('error') or event))}"
        if usage.turns == 0 and usage.error is None:
            usage.error = f"opencode printed no finished step: {tail(stderr or stdout)}"
        return usage


TOKEN_VARIABLES = ("COPILOT_GITHUB_TOKEN", "GH_TOKEN", "GITHUB_TOKEN")


@dataclass
class CopilotClient(ClientAdapter):
    name = "copilot-cli"
    label = "Copilot CLI"
    default_command = "copilot"
    install_hint = "install it with `npm install -g @github/copilot`"
    login_fix = (
        "export COPILOT_GITHUB_TOKEN (a token with the Copilot Requests permission): a "
        "trial's session runs in a throwaway home, which cannot reach a login kept in the "
        "system keychain"
    )

    def check_login(self, home: Path, env: Mapping[str, str]) -> None:
        if not any(env.get(name) for name in TOKEN_VARIABLES):
            raise InputError(f"Copilot CLI has no token for a trial: {self.login_fix}")

    def session_args(self, prompt: str, model: str | None) -> list[str]:
        args = ["-p", prompt, "--allow-all-tools", "--output-format", "json"]
        return [*args, "--model", model] if model else args

    def parse(self, stdout: str, stderr: str) -> SessionUsage:
        """Its JSONL (1.0.102): an `assistant.message` per model turn, a
        `tool.execution_start` per tool call, a closing `result` with the session id and
        exit code. It reports premium requests, not tokens: token figures stay 0 unless an
        event carries counts."""
        usage = SessionUsage()
        finished = False
        for event in json_lines(stdout):
            kind = str(event.get("type") or "")
            for counts in _usage_dicts(event):
                usage.tokens_in += as_int(counts.get("inputTokens") or counts.get("input_tokens"))
                usage.tokens_out += as_int(
                    counts.get("outputTokens") or counts.get("output_tokens")
                )
            if kind == "assistant.message":
                usage.turns += 1
            elif kind == "tool.execution_start":
                usage.tool_calls += 1
            elif kind == "result":
                finished = True
                usage.session_id = event.get("sessionId")
                if as_int(event.get("exitCode")):
                    usage.error = f"Copilot CLI exited {event['exitCode']}: {tail(stderr)}"
            elif kind in ("session.error", "error"):
                usage.error = f"Copilot CLI: {tail(json.dumps(event.get('data') or event))}"
        if not finished and usage.error is None:
            usage.error = f"Copilot CLI printed no result: {tail(stderr or stdout)}"
        return usage


def _usage_dicts(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every mapping in `value` that carries token counts."""
    if isinstance(value, dict):
        if any(key in value for key in ("inputTokens", "input_tokens")):
            yield value
            return
        for item in value.values():
            yield from _usage_dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _usage_dicts(item)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
