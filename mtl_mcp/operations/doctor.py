"""Health checks for `mtl-mcp doctor`: each says what is wrong and how to fix it."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from mtl_mcp.config import DEFAULT_EMBED_MODEL, Settings, private_umask
from mtl_mcp.errors import DistillError, MtlError, StoreUnavailable
from mtl_mcp.index.embedder import MiniLMEmbedder, default_model_file, get_embedder
from mtl_mcp.learning.backends.select import CLI_BACKENDS, Chooser
from mtl_mcp.memory import Memory
from mtl_mcp.storage.backup import backups_dir, inspect_store, list_backups


class Check(BaseModel):
    name: str
    ok: bool
    detail: str
    fix: str | None = None
    required: bool = True


def _data_dir(settings: Settings) -> Check:
    home = settings.home
    try:
        home.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=home):
            pass
    except OSError as exc:
        return Check(
            name="data dir",
            ok=False,
            detail=f"{home} is not writable ({exc})",
            fix="fix its permissions, or point MTL_MCP_HOME / --home elsewhere",
        )
    return Check(name="data dir", ok=True, detail=str(home))


def _model(settings: Settings) -> Check:
    try:
        if settings.embed_model == DEFAULT_EMBED_MODEL:
            path = default_model_file()
            detail = f"{settings.embed_model} ({path}, sha256 verified)"
        else:
            detail = settings.embed_model
        embedder = get_embedder(settings)
        dim = embedder.embed_query("doctor").shape[0]
        if isinstance(embedder, MiniLMEmbedder):
            detail += f", running {embedder.model_file.name}"
    except MtlError as exc:
        return Check(
            name="embedding model",
            ok=False,
            detail=str(exc),
            fix="reinstall mtl-mcp, or unset MTL_MCP_EMBED_MODEL to use the default",
        )
    return Check(name="embedding model", ok=True, detail=f"{detail}, dim {dim}")


def _store(settings: Settings) -> Check:
    memory = Memory(settings)
    try:
        numbers = memory.stats()
        meta = memory.meta
    except StoreUnavailable as exc:
        return Check(name="store", ok=False, detail=str(exc), fix=_REACH_ADVICE)
    except MtlError as exc:
        return Check(
            name="store",
            ok=False,
            detail=str(exc),
            fix=_restore_advice(settings),
        )
    finally:
        memory.close()
    detail = (
        f"{settings.store_uri}: {numbers['total']} active insights, "
        f"schema {meta.get('schema_version')}, model {numbers['embed_model']}"
    )
    if moving := numbers.get("reembedding"):
        detail += (
            f"; re-embedding with {moving['model']}: {moving['done']} of {moving['total']} done "
            "(a running server goes on in the background; `mtl-mcp reindex` finishes it now)"
        )
    elif numbers["embed_model"] != settings.embed_model:
        return Check(
            name="store",
            ok=False,
            detail=detail,
            fix=f"run `mtl-mcp reindex` to re-embed with {settings.embed_model}",
        )
    return Check(name="store", ok=True, detail=detail)


_REACH_ADVICE = (
    "check the URI, the endpoint and credentials ([storage] in config.toml, or the standard "
    "AWS_/GOOGLE_/AZURE_ variables and profiles), and that the object store is up"
)
TEAM_WAIT = 15.0  # seconds doctor waits for the team pool to answer


def _team(settings: Settings) -> Check:
    """The team pool: reachable, the same embedding model, and the outbox."""
    memory = Memory(settings)
    try:
        team = memory.team
        if team is None:  # run_checks asks only when one is configured
            return Check(name="team pool", ok=True, required=False, detail="none configured")
        waiting = len(team.outbox.pending())
        outbox = f"; {waiting} shares waiting in the outbox" if waiting else ""
        if not team.tier.probe(TEAM_WAIT):
            error = team.tier.status().error or f"no answer within {TEAM_WAIT:.0f} s"
            return Check(
                name="team pool",
                ok=False,
                required=False,
                detail=f"{settings.team_uri} is unreachable ({error}){outbox}",
                fix=_REACH_ADVICE,
            )
        snapshot = team.snapshot(TEAM_WAIT)  # what recall and `stats` read, local or remote
        if snapshot is None:
            detail = f"{settings.team_uri}: empty (the first `mtl-mcp share` creates it){outbox}"
            return Check(name="team pool", ok=True, required=False, detail=detail)
        if problem := team.model_problem(settings.embed_model):
            return Check(name="team pool", ok=False, required=False, detail=problem)
        detail = (
            f"{settings.team_uri}: {int(snapshot.active.sum())} active insights, "
            f"{len(team.shared_in(snapshot))} shared by you{outbox}"
        )
        return Check(name="team pool", ok=True, required=False, detail=detail)
    except MtlError as exc:
        return Check(name="team pool", ok=False, required=False, detail=str(exc))
    finally:
        memory.close()


class _Ping(BaseModel):
    """The doctor's tiny structured question."""

    answer: Literal["yes", "no"] = Field(description="yes or no")
    because: str = Field(description="one short reason")


PING_MAX_TOKENS = 60
PING_TIMEOUT = 30.0  # seconds for each request of the structured call (a model may load)


def _endpoint_budget(settings: Settings, local: bool) -> str:
    if not local:
        return f"a remote API: the daily budget applies ({settings.daily_token_budget:,} tokens)"
    limit = settings.local_daily_tokens
    if limit is None:
        return "on this machine: no daily limit (MTL_MCP_LOCAL_DAILY_TOKENS unset)"
    return f"on this machine: at most {limit:,} tokens a day (MTL_MCP_LOCAL_DAILY_TOKENS)"


def _openai_endpoint(settings: Settings) -> Check:
    """The OpenAI-compatible endpoint: reachable, the model listed, a structured answer."""
    from mtl_mcp.learning.backends.openai_compat import OpenAIBackend
    from mtl_mcp.learning.backends.openai_endpoint import Endpoint, endpoint_status
    from mtl_mcp.learning.pipeline import ledger
    from mtl_mcp.learning.spend import Usage

    name = "openai endpoint"
    endpoint = Endpoint(settings)
    try:
        status = endpoint_status(settings, endpoint)
        budget = _endpoint_budget(settings, endpoint.local)
        if not status.usable:
            detail = f"{status.detail}; {budget}"
            return Check(name=name, ok=False, required=False, detail=detail, fix=status.fix)
        backend = OpenAIBackend(
            settings,
            status,
            endpoint=endpoint,
            record_answers=False,
            timeout=min(PING_TIMEOUT, settings.openai_timeout),
        )
        context, source = backend.context_window()
        usage = Usage()
        started = time.perf_counter()
        try:
            backend.ask(
                step="doctor",
                system="You check that you can answer in JSON.",
                user="Is 2 + 2 equal to 4?",
                answer=_Ping,
                max_tokens=PING_MAX_TOKENS,
                usage=usage,
            )
        except DistillError as exc:
            unusable = "did not return usable JSON" in str(exc)
            return Check(
                name=name,
                ok=False,
                required=False,
                detail=f"{status.detail}, but a structured call failed: {exc}",
                fix=f"model {settings.openai_model!r} cannot follow the JSON schema: set "
                "MTL_MCP_OPENAI_MODEL to a larger instruction-tuned model"
                if unusable
                else None,
            )
        finally:
            ledger(settings).record(
                usage.total_tokens, session="doctor", backend=backend.name, local=backend.local
            )
        took = time.perf_counter() - started
    finally:
        endpoint.close()
    detail = (
        f"{status.detail}; model {settings.openai_model}, context window {context:,} tokens "
        f"(from {source}); a structured answer came back in {took:.1f} s "
        f"({usage.total_tokens} tokens); {budget}"
    )
    return Check(name=name, ok=True, required=False, detail=detail)


def _distillation(settings: Settings) -> Check:
    """Which backend distils the sessions of each assistant, or why none can."""
    chooser = Chooser(settings)
    choices = {source: chooser.choose(source) for source in CLI_BACKENDS}
    detail = "; ".join(
        f"{source} sessions: "
        + (f"{c.backend.name} ({c.reason})" if c.backend else f"wait in the queue ({c.reason})")
        for source, c in choices.items()
    )
    if any(c.backend for c in choices.values()):
        return Check(name="distillation", ok=True, required=False, detail=detail)
    return Check(
        name="distillation",
        ok=False,
        required=False,
        detail=f"session transcripts are not distilled (recall still works): {detail}",
        fix="set MTL_MCP_OPENAI_BASE_URL and MTL_MCP_OPENAI_MODEL for a local model, or "
        f"export ANTHROPIC_API_KEY (or add anthropic_api_key to {settings.config_file}), "
        "or log in to Claude Code (`claude`, then /login) or Codex (`codex login`); see "
        "MTL_MCP_DISTILL_BACKEND",
    )


def _kept_notes(settings: Settings) -> Check | None:
    """How many of the assistants' memory files were learnt from, and how many are new or
    changed since; None on a machine without any."""
    from mtl_mcp.learning.discovery import memory_files, unread
    from mtl_mcp.learning.spool import Spool

    found = memory_files()
    if not found:
        return None
    spool = Spool(settings)
    waiting = unread(found, spool.done())
    per_client = ", ".join(
        f"{client} {sum(n.client == client for n in found)}"
        for client in sorted({n.client for n in found})
    )
    detail = (
        f"{len(found)} memory files on this machine ({per_client}); "
        f"{spool.notes_learnt()} notes files learnt from so far"
    )
    if waiting:
        detail += (
            f"; {len(waiting)} new or changed since: `mtl-mcp distill --memories` learns from "
            "them (`distill --since` from those changed within its window)"
        )
    return Check(name="assistant memories", ok=True, required=False, detail=detail)


def _restore_advice(settings: Settings) -> str:
    backups = list_backups(settings)
    if not backups:
        return (
            f"no backup exists in {backups_dir(settings)}: move {settings.store_uri} aside and "
            "re-import an export (`mtl-mcp import FILE`), or start afresh"
        )
    newest = backups[0]
    return (
        f"stop any running mtl-mcp servers, then restore the newest backup ({newest.insights} "
        f"insights, taken {newest.created_at:%Y-%m-%d %H:%M} UTC before a {newest.reason}): "
        f"`mtl-mcp restore {newest.path}`"
    )


def _store_files(settings: Settings) -> Check:
    problem = inspect_store(settings)
    if problem:
        return Check(
            name="store files",
            ok=False,
            detail=f"{settings.store_uri}: {problem}",
            fix=_restore_advice(settings),
        )
    return Check(name="store files", ok=True, detail="every table and data file reads")


def _backups(settings: Settings) -> Check:
    backups = list_backups(settings)
    if not backups:
        detail = (
            "none yet: one is taken before each migration, purge and restore, "
            "and `mtl-mcp backup` takes one now"
        )
        return Check(name="backups", ok=True, required=False, detail=detail)
    newest = backups[0]
    return Check(
        name="backups",
        ok=True,
        required=False,
        detail=f"{len(backups)} in {backups_dir(settings)}; newest {newest.name} "
        f"({newest.insights} insights); restore with `mtl-mcp restore {newest.path}`",
    )


def _service(settings: Settings) -> Check:
    from mtl_mcp.operations.service import TAKEOVER, Rendezvous, statuses
    from mtl_mcp.version import __version__

    if not settings.service:
        return Check(
            name="service",
            ok=True,
            required=False,
            detail="off (MTL_MCP_SERVICE=off): every window loads its own model and store",
        )
    found = statuses(settings)
    mine = [s for s in found if s["current"] and not s.get("older")]
    older = [s for s in found if s["current"] and s.get("older") and not s.get("retiring")]
    retiring = [str(s["pid"]) for s in found if s.get("retiring")]
    others = [s for s in found if not s["current"] and not s.get("retiring")]
    old_layout = [f"mtl-mcp {s['version']}, pid {s['pid']}" for s in others if s["key"] is None]
    others_pids = [str(s["pid"]) for s in others if s["key"] is not None]
    if mine:
        detail = (
            f"running for these settings: pid {mine[0]['pid']}, version {mine[0]['version']}, "
            f"{mine[0]['windows']} windows, {mine[0]['rss_mb']} MB resident"
        )
    elif older:
        detail = (
            f"running for these settings: pid {older[0]['pid']}, mtl-mcp {older[0]['version']}, "
            f"older than this {__version__}: {TAKEOVER}"
        )
    else:
        log = Rendezvous.of(settings).log_file
        detail = f"not running for these settings: the first window starts it (its log: {log})"
    if retiring:
        detail += (
            f"; {len(retiring)} of an older version retiring (pid {', '.join(retiring)}): "
            "it serves the windows opened before it was replaced, and exits when they close"
        )
    if old_layout:
        detail += (
            f"; a service of 0.2's layout ({', '.join(old_layout)}), which serves whatever "
            "settings started it: the first service of this version takes over from it"
        )
    if others_pids:
        detail += (
            f"; {len(others_pids)} more for other settings (pid {', '.join(others_pids)}): "
            "`mtl-mcp service status`"
        )
    return Check(name="service", ok=True, required=False, detail=detail)


def _open_to_others(path: Path) -> bool:
    try:
        return not path.is_symlink() and bool(path.stat().st_mode & 0o077)
    except OSError:  # removed while we looked (a worker's temporary file)
        return False


def _permissions(settings: Settings) -> Check:
    home = settings.home
    loose = [path for path in [home, *home.rglob("*")] if _open_to_others(path)]
    if loose:
        return Check(
            name="permissions",
            ok=False,
            required=False,
            detail=f"{len(loose)} files or folders under {home} are open to other users, "
            f"e.g. {loose[0]}",
            fix=f"chmod -R go-rwx {home}",
        )
    return Check(name="permissions", ok=True, required=False, detail="owner-only (0700/0600)")


def _codex_hooks(user_home: Path, project_dir: Path) -> Check | None:
    """Whether Codex runs the hooks `install codex` wrote (None when there are none)."""
    from mtl_mcp.operations.install.codex_trust import installed_trust

    user_config = user_home / ".codex" / "config.toml"
    folders = dict.fromkeys([user_home / ".codex", project_dir / ".codex"])
    found = [
        item for folder in folders for item in installed_trust(folder / "hooks.json", user_config)
    ]
    if not found:
        return None
    waiting = [(hook, status) for hook, status in found if status != "trusted"]
    if not waiting:
        detail = f"{len(found)} mtl-mcp hooks, all trusted by Codex"
        return Check(name="codex hooks", ok=True, required=False, detail=detail)
    listed = ", ".join(f"{hook.event} {status}" for hook, status in waiting)
    return Check(
        name="codex hooks",
        ok=False,
        required=False,
        detail=f"Codex runs none of these (codex exec skips them silently): {listed}",
        fix="start `codex` and trust them with /hooks, or run `mtl-mcp install codex "
        "--trust-hooks`",
    )


def _gemini_trust(user_home: Path, project_dir: Path) -> Check | None:
    """Whether Gemini CLI starts mtl-mcp in this folder (None when it is not installed for
    Gemini): with folder trust on, it starts no MCP server, user-level ones included, and
    runs no hook in a folder the user did not trust. Only the user may trust it."""
    from mtl_mcp.operations.install.plans import gemini_installed, gemini_trust

    if not gemini_installed(user_home, project_dir):
        return None
    status = gemini_trust(user_home, project_dir)
    name = "gemini-cli folder trust"
    if status == "trusted":
        return Check(name=name, ok=True, required=False, detail=f"Gemini CLI trusts {project_dir}")
    said = "does not trust" if status == "untrusted" else "has no trust decision for"
    return Check(
        name=name,
        ok=False,
        required=False,
        detail=f"Gemini CLI {said} {project_dir}: with folder trust on (as in recent "
        "versions), it starts no MCP server and runs no hook here, and `gemini -p` stops",
        fix="start `gemini` in this folder and choose 'Trust folder' (or use /permissions); "
        "mtl-mcp never trusts a folder for you",
    )


def _client_configs(settings: Settings, user_home: Path, project_dir: Path) -> list[Check]:
    """The client configs that register mtl-mcp: one check for those up to date, one for
    each that an older install left (installing again would change it)."""
    from mtl_mcp.operations.install.stale import install_launch, installed_configs

    found = installed_configs(
        install_launch(settings.home), user_home=user_home, project_dir=project_dir
    )
    checks = [
        Check(
            name=f"{item.client} config",
            ok=False,
            required=False,
            detail=f"{item.client} ({item.scope} scope) is not set up as this mtl-mcp installs "
            f"it (an older install left it, or it was edited): {'; '.join(item.problems)}",
            fix=f"run `{item.fix}` again: it keeps every other setting and backs each file up",
        )
        for item in found
        if item.stale
    ]
    if current := [f"{item.client} ({item.scope})" for item in found if not item.stale]:
        detail = f"up to date: {', '.join(current)}"
        checks.insert(0, Check(name="client configs", ok=True, required=False, detail=detail))
    return checks


def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order a person would fix them."""
    private_umask()  # the checks create the data dir and the store if they are missing
    checks = [_data_dir(settings), _model(settings)]
    if checks[0].ok:
        checks.append(_permissions(settings))
    if checks[0].ok and checks[1].ok:
        checks.append(_store_files(settings))
        if checks[-1].ok:
            checks.append(_store(settings))
    if checks[0].ok:
        checks.append(_backups(settings))
        checks.append(_service(settings))
    if settings.team_uri and checks[1].ok:
        checks.append(_team(settings))
    if settings.openai_base_url:
        checks.append(_openai_endpoint(settings))
    checks.append(_distillation(settings))
    if notes := _kept_notes(settings):
        checks.append(notes)
    checks += _client_configs(settings, Path.home(), Path.cwd())
    if codex := _codex_hooks(Path.home(), Path.cwd()):
        checks.append(codex)
    if gemini := _gemini_trust(Path.home(), Path.cwd()):
        checks.append(gemini)
    return checks
