"""Gemini CLI in a trial: `gemini -p -o json --approval-mode yolo`, in a throwaway HOME
whose `.gemini/oauth_creds.json` is a symlink to the user's (or whose API key comes from
the environment), with the work dir trusted there."""

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
    link_login,
    read_json,
    tail,
    write_json,
)

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
LOGIN_FILES = ("oauth_creds.json", "google_accounts.json")


@dataclass
class GeminiCliClient(ClientAdapter):
    name = "gemini-cli"
    label = "Gemini CLI"
    default_command = "gemini"
    install_hint = "install it with `npm install -g @google/gemini-cli`"
    login_fix = "run `gemini` and choose 'Login with Google', or export GEMINI_API_KEY"

    @property
    def config_dir(self) -> Path:
        moved = self.environ.get("GEMINI_CLI_HOME")
        return (Path(moved) if moved else self.user_home) / ".gemini"

    def check_login(self, home: Path, env: Mapping[str, str]) -> None:
        chosen = (read_json(self.config_dir / "settings.json").get("security") or {}).get("auth")
        kind = chosen.get("selectedType") if isinstance(chosen, dict) else None
        has_key = any(env.get(name) for name in KEY_VARIABLES)
        has_login = (self.config_dir / "oauth_creds.json").is_file()
        vertex = bool(env.get("GOOGLE_GENAI_USE_VERTEXAI") and env.get("GOOGLE_CLOUD_PROJECT"))
        if kind == "gemini-api-key" and not has_key:
            raise InputError(
                f"Gemini CLI uses an API key, but GEMINI_API_KEY is not set: {self.login_fix}"
            )
        if kind == "oauth-personal" and not has_login:
            raise InputError(f"Gemini CLI is not logged in with Google: {self.login_fix}")
        if not (has_key or has_login or vertex or kind):
            raise InputError(f"Gemini CLI is not logged in: {self.login_fix}")

    def prepare_home(self, home: Path, workdir: Path, env: dict[str, str]) -> None:
        gemini = home / ".gemini"
        for name in LOGIN_FILES:
            link_login(self.config_dir / name, gemini / name)
        user = read_json(self.config_dir / "settings.json")
        settings: dict[str, Any] = {
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }
        auth = (user.get("security") or {}).get("auth")
        if isinstance(auth, dict):
            settings["security"] = {"auth": auth}
        elif any(env.get(name) for name in KEY_VARIABLES):
            settings["security"] = {"auth": {"selectedType": "gemini-api-key"}}
        for key in ("model", "privacy", "telemetry"):
            if key in user:
                settings[key] = user[key]
        write_json(gemini / "settings.json", settings)
        write_json(gemini / "trustedFolders.json", {str(workdir): "TRUST_FOLDER"})

    def session_args(self, prompt: str, model: str | None) -> list[str]:
        args = ["-p", prompt, "-o", "json", "--approval-mode", "yolo"]
        return [*args, "-m", model] if model else args

    def parse(self, stdout: str, stderr: str) -> SessionUsage:
        usage = SessionUsage()
        document = json_document(stdout)
        if document is None:
            usage.error = f"Gemini CLI printed no JSON result: {tail(stderr or stdout)}"
            return usage
        usage.session_id = document.get("session_id")
        stats = document.get("stats") or {}
        for model in (stats.get("models") or {}).values():
            tokens = model.get("tokens") or {}
            usage.tokens_in += as_int(tokens.get("prompt"))
            usage.tokens_out += as_int(tokens.get("candidates")) + as_int(tokens.get("thoughts"))
            main = (model.get("roles") or {}).get("main")
            requests = (main or model.get("api") or {}).get("totalRequests")
            usage.turns += as_int(requests)
        usage.tool_calls = as_int((stats.get("tools") or {}).get("totalCalls"))
        if document.get("error"):
            error = document["error"]
            message = error.get("message") if isinstance(error, dict) else error
            usage.error = f"Gemini CLI: {tail(str(message))}"
        return usage
