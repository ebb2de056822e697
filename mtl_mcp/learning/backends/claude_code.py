"""The user's Claude Code login as a backend: `claude -p`, headless.

The child authenticates exactly as the user's own `claude` does (the OAuth login,
`apiKeyHelper`, the settings' `env`, Bedrock or Vertex); `--bare` is never used, as it
ignores the OAuth login. Every call is lean and side-effect free: structured output through
`--json-schema` (Claude Code adds a StructuredOutput tool and checks the answer against the
schema), no tools, no MCP servers, hooks disabled (and the child marked, see `child`), no
session saved, our system prompt instead of Claude Code's, the prompt on stdin, an empty
working directory, thinking off and the answer capped at the step's `max_tokens`. Usage
comes from the JSON result, so the ledger counts what the subscription was charged.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

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
    json_object,
    parse_answer,
    strict_schema,
    unusable,
)
from mtl_mcp.learning.spend import Usage
from mtl_mcp.text.tokens import estimate_tokens

# Flags every call needs; a `claude` whose help lacks one is too old.
REQUIRED_FLAGS = (
    "--json-schema",
    "--tools",
    "--strict-mcp-config",
    "--no-session-persistence",
    "--system-prompt",
    "--settings",
)
NO_HOOKS = json.dumps({"disableAllHooks": True})
NO_MCP_SERVERS = json.dumps({"mcpServers": {}})
# Claude Code's own text around our system prompt (identity, environment block) and its two
# tool definitions: about 1,900 characters with 2.1.332.
EXTRA_TOKENS_PER_CALL = 700
LOGIN_FIX = "run `claude` and log in with /login (or `claude auth login`)"
QUIET = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # no update checks, no telemetry
_SWITCH_MODEL = "if this keeps happening, set MTL_MCP_CLAUDE_CODE_MODEL to another model"


class ClaudeCodeBackend:
    """Structured output from `claude -p --output-format json --json-schema ...`."""

    name = "claude-code"
    uses_subscription = True
    extra_tokens_per_call = EXTRA_TOKENS_PER_CALL

    def __init__(self, settings: Settings, executable: str) -> None:
        self._settings = settings
        self.executable = executable

    @property
    def model(self) -> str:
        return self._settings.claude_code_model

    def command(self, system: str, schema: dict[str, Any]) -> list[str]:
        """The command line of one call (the prompt goes on stdin)."""
        return [
            self.executable,
            "-p",
            "--output-format", "json",
            "--json-schema", json.dumps(schema),
            "--tools", "",
            "--strict-mcp-config", "--mcp-config", NO_MCP_SERVERS,
            "--no-session-persistence",
            "--settings", NO_HOOKS,
            "--model", self.model,
            "--system-prompt", system,
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
        """One `claude -p` run; failures become DistillErrors; usage is added."""
        timeout = self._settings.cli_timeout
        with tempfile.TemporaryDirectory(prefix="mtl-mcp-claude-") as empty:
            done = run_child(
                self.command(system, strict_schema(answer)),
                what="claude",
                timeout=timeout,
                stdin=user,
                env={
                    "CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_tokens),
                    "CLAUDE_CODE_DISABLE_THINKING": "1",
                    **QUIET,
                    # Its default, 10 retries, takes minutes; our queue backs off instead.
                    "CLAUDE_CODE_MAX_RETRIES": os.environ.get("CLAUDE_CODE_MAX_RETRIES", "2"),
                },
                cwd=Path(empty),
            )
        if done.stopped:  # it may have spent tokens: count a whole call
            usage.add(estimate_tokens(system + user), max_tokens)
            raise stopped_error("claude", timeout, done)
        result = _json_result(done.stdout)
        if result is None:
            raise DistillUnavailable(
                f"claude printed no JSON result (exit {done.returncode}: "
                f"{snippet(done.stdout + ' ' + done.stderr)}); the job stays queued: check "
                "that MTL_MCP_CLAUDE_COMMAND runs Claude Code"
            )
        counts = result.get("usage")
        usage.add(
            reported_tokens(
                counts, "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"
            ),
            reported_tokens(counts, "output_tokens"),
        )
        if result.get("is_error") or done.returncode != 0:
            raise _failure(result, done.returncode, step)
        if "structured_output" not in result:
            raise unusable(step, "it answered in prose, not the requested JSON", _SWITCH_MODEL)
        return parse_answer(result["structured_output"], answer, step=step, fix=_SWITCH_MODEL)


def _json_result(stdout: str) -> dict[str, Any] | None:
    """The `--output-format json` result object, or None if stdout is something else."""
    data = json_object(stdout)
    return data if data is not None and data.get("type") == "result" else None


def _failure(result: dict[str, Any], returncode: int, step: str) -> DistillError:
    """A failed run as our error: a login problem, an exhausted schema retry, or an outage."""
    message = snippet(str(result.get("result") or result.get("subtype") or ""))
    if result.get("subtype") == "error_max_structured_output_retries":
        return unusable(step, "Claude Code gave up getting the schema's shape", _SWITCH_MODEL)
    if "not logged in" in message.lower() or result.get("api_error_status") in (401, 403):
        return DistillUnavailable(
            f"Claude Code is not logged in or its credentials were refused ({message}): "
            f"{LOGIN_FIX}; the job stays queued and is retried"
        )
    return DistillUnavailable(
        f"claude failed at the {step} step (exit {returncode}: {message}); the job stays "
        "queued and is retried later"
    )


def claude_status(settings: Settings) -> CliStatus:
    """Whether `claude` can distil: installed, new enough and logged in (it runs three
    quick commands: --version, --help and `auth status`)."""
    executable = shutil.which(settings.claude_command)
    if executable is None:
        return CliStatus(
            None,
            f"`{settings.claude_command}` is not on PATH: install Claude Code, or set "
            "MTL_MCP_CLAUDE_COMMAND to its path",
        )
    try:
        version = probe(executable, "--version", env=QUIET).stdout.strip() or "(unknown version)"
        helped = probe(executable, "--help", env=QUIET).stdout
        missing = [flag for flag in REQUIRED_FLAGS if flag not in helped]
        if missing:
            return CliStatus(
                None,
                f"claude {version} is too old (no {', '.join(missing)}): update it with "
                "`claude update`",
            )
        auth = probe(executable, "auth", "status", env=QUIET)
    except DistillError as exc:
        return CliStatus(None, str(exc))
    state = json_object(auth.stdout) or {}
    third_party = state.get("apiProvider", "firstParty") != "firstParty"
    if auth.returncode != 0 and not third_party:
        return CliStatus(None, f"claude {version} is not logged in: {LOGIN_FIX}")
    how = state.get("authMethod") or state.get("apiProvider") or "logged in"
    return CliStatus(executable, f"claude {version} at {executable}, logged in ({how})")
