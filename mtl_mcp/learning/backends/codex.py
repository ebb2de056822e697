"""The user's Codex login as a backend: `codex exec`, headless.

The child uses the user's own `CODEX_HOME` for authentication (a ChatGPT login or an API
key; a copy of `auth.json` could break the login's token refresh) but not their
`config.toml` (`--ignore-user-config`), so none of their MCP servers, notify programs or
profiles run; hooks are off (`--disable hooks`) and the child is marked (see `child`). It
runs in a read-only sandbox without the shell, web search, apps or plugins, saves no
session (`--ephemeral`), starts in an empty directory and never asks for approval. Our
system prompt goes in as developer instructions, beside Codex's own prompt (which stays:
the ChatGPT backend is not known to accept a replacement); the prompt goes on stdin.
`--output-schema` asks for structured output, which Codex does not check: we do. Usage
comes from the `turn.completed` event of `--json`.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from mtl_mcp.config import Settings
from mtl_mcp.errors import DistillError, DistillUnavailable
from mtl_mcp.learning.backends import Answer
from mtl_mcp.learning.backends.child import (
    CliStatus,
    probe,
    reported_tokens,
    run_child,
    snippet,
    stopped_error,
)
from mtl_mcp.learning.backends.structured import (
    json_in_text,
    json_object,
    parse_answer,
    strict_schema,
    unusable,
)
from mtl_mcp.learning.spend import Usage
from mtl_mcp.text.tokens import estimate_tokens

LOCKED_DOWN = [
    "--ignore-user-config",
    "--ephemeral",
    "--skip-git-repo-check",
    "--sandbox", "read-only",
    "--disable", "hooks",
    "-c", 'approval_policy="never"',
    "-c", "analytics.enabled=false",
    "-c", "features.plugins=false",
    "-c", "features.apps=false",
    "-c", "features.shell_tool=false",
    "-c", "features.goals=false",
    "-c", 'web_search="disabled"',
    "-c", "skills.include_instructions=false",
    "-c", "skills.bundled.enabled=false",
    "-c", "project_doc_max_bytes=0",
    "-c", 'model_reasoning_effort="low"',
]  # fmt: skip
# Flags every call needs; a `codex` whose `exec --help` lacks one is too old.
REQUIRED_FLAGS = (
    "--output-schema",
    "--json",
    "--ephemeral",
    "--ignore-user-config",
    "--disable",
    "--sandbox",
    "--skip-git-repo-check",
)
# Codex's own prompt, tool list and environment around ours: about 42,000 characters of
# request with 0.171.0, on every call.
EXTRA_TOKENS_PER_CALL = 11_000
LOGIN_FIX = "run `codex login`"
_SWITCH_MODEL = "if this keeps happening, set MTL_MCP_CODEX_MODEL to another model"
_LOGIN_REFUSED = ("401", "unauthorized", "not logged in", "missing environment variable")


class CodexBackend:
    """Structured output from `codex exec --output-schema FILE --json -`."""

    name = "codex"
    uses_subscription = True
    extra_tokens_per_call = EXTRA_TOKENS_PER_CALL

    def __init__(self, settings: Settings, executable: str) -> None:
        self._settings = settings
        self.executable = executable

    @property
    def model(self) -> str:
        return self._settings.codex_model or "codex-default"

    def command(self, system: str, schema_file: Path, workdir: Path) -> list[str]:
        """The command line of one call (the prompt goes on stdin)."""
        model = ["-m", self._settings.codex_model] if self._settings.codex_model else []
        return [
            self.executable,
            "exec",
            *LOCKED_DOWN,
            *model,
            "-c", f"developer_instructions={json.dumps(system, ensure_ascii=False)}",
            "-C", str(workdir),
            "--output-schema", str(schema_file),
            "--json",
            "-",
        ]  # fmt: skip

    def ask(
        self,
        *,
        step: str,
        system: str,
        user: str,
        answer: type[Answer],
        max_tokens: int,
        usage: Usage,
    ) -> Answer:
        """One `codex exec` run; failures become DistillErrors; usage is added."""
        timeout = self._settings.cli_timeout
        with tempfile.TemporaryDirectory(prefix="mtl-mcp-codex-") as scratch:
            schema_file, workdir = Path(scratch) / "schema.json", Path(scratch) / "work"
            schema_file.write_text(json.dumps(strict_schema(answer)), encoding="utf-8")
            workdir.mkdir()
            done = run_child(
                self.command(system, schema_file, workdir),
                what="codex",
                timeout=timeout,
                stdin=user,
                cwd=workdir,
            )
        if done.stopped:  # it may have spent tokens: count a whole call
            usage.add(estimate_tokens(system + user), max_tokens)
            raise stopped_error("codex", timeout, done)
        events = [e for e in map(json_object, done.stdout.splitlines()) if e is not None]
        if not events:
            raise DistillUnavailable(
                f"codex printed no JSON events (exit {done.returncode}: "
                f"{snippet(done.stdout + ' ' + done.stderr)}); the job stays queued: check "
                "that MTL_MCP_CODEX_COMMAND runs the Codex CLI"
            )
        final, failure = None, None
        for event in events:
            kind, item = event.get("type"), event.get("item")
            if kind == "turn.completed":  # summed over the turn's requests; cached included
                counts = event.get("usage")
                usage.add(
                    reported_tokens(counts, "input_tokens"),
                    reported_tokens(counts, "output_tokens"),
                )
            elif kind == "turn.failed":
                error = event.get("error")
                failure = str(error.get("message") if isinstance(error, dict) else error)
            elif (
                kind == "item.completed"
                and isinstance(item, dict)
                and item.get("type") == "agent_message"
            ):
                final = str(item.get("text") or "")
        if failure is not None or done.returncode != 0:
            raise _failure(failure or done.stderr, done.returncode, step)
        if final is None:
            raise unusable(step, "codex returned no answer", _SWITCH_MODEL)
        try:
            data = json_in_text(final)
        except ValueError:
            raise unusable(step, "the answer is not JSON", _SWITCH_MODEL) from None
        return parse_answer(data, answer, step=step, fix=_SWITCH_MODEL)


def _failure(message: str, returncode: int, step: str) -> DistillError:
    text = snippet(message)
    if any(marker in text.lower() for marker in _LOGIN_REFUSED):
        return DistillUnavailable(
            f"Codex is not logged in or its credentials were refused ({text}): {LOGIN_FIX}; "
            "the job stays queued and is retried"
        )
    return DistillUnavailable(
        f"codex failed at the {step} step (exit {returncode}: {text}); the job stays queued "
        "and is retried later"
    )


def codex_status(settings: Settings) -> CliStatus:
    """Whether `codex` can distil: installed, new enough and logged in (it runs three quick
    commands: --version, `exec --help` and `login status`)."""
    executable = shutil.which(settings.codex_command)
    if executable is None:
        return CliStatus(
            None,
            f"`{settings.codex_command}` is not on PATH: install Codex, or set "
            "MTL_MCP_CODEX_COMMAND to its path",
        )
    try:
        version = probe(executable, "--version").stdout.strip() or "codex (unknown version)"
        helped = probe(executable, "exec", "--help").stdout
        missing = [flag for flag in REQUIRED_FLAGS if flag not in helped]
        if missing:
            return CliStatus(
                None,
                f"{version} is too old (no {', '.join(missing)} for `codex exec`): update it",
            )
        login = probe(executable, "login", "status")
    except DistillError as exc:
        return CliStatus(None, str(exc))
    if login.returncode != 0:
        return CliStatus(None, f"{version} is not logged in: {LOGIN_FIX}")
    said = [line for line in (login.stderr + login.stdout).splitlines() if line.strip()]
    how = next((line for line in said if not line.startswith("WARNING")), "logged in")
    return CliStatus(executable, f"{version} at {executable}, {snippet(how)}")
