"""The dashboard's routes: the page, its static files, a JSON API over `Memory`, and the live
feed. Each route calls one `Memory` method (off the event loop) and translates: our errors
become a JSON `{"error": ...}` with a status, as the CLI turns them into `Error: ...`.

The guard (`mtl_mcp.dashboard.guard`) has already checked Host, Origin and the session
before any of these runs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, get_args

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mtl_mcp import errors
from mtl_mcp.dashboard import trials, upkeep, views
from mtl_mcp.dashboard.actions import ACTIONS
from mtl_mcp.dashboard.guard import NEW_LINK, STATIC_FILES, Guard, Launch
from mtl_mcp.errors import InputError, MtlError
from mtl_mcp.memory.listeners import ChangeListeners
from mtl_mcp.schemas import BrowseSort, Category, Polarity, RatingState, Scope, Source
from mtl_mcp.version import __version__

if TYPE_CHECKING:
    from starlette.types import ASGIApp

    from mtl_mcp.config import Settings
    from mtl_mcp.memory import Memory

logger = logging.getLogger(__name__)
T = TypeVar("T")
STATIC = Path(__file__).with_name("static")
PAGE_MAX = 100
POLL_SECONDS = 0.25  # how often a live feed looks for a change this process made
STAMP_SECONDS = 1.0  # how often it looks for other processes' (the table, the ledger)
PING_SECONDS = 15.0
# The choices the page's filters and forms offer, from the schemas (the page repeats none).
OPTIONS = {
    "categories": list(get_args(Category)),
    "polarities": list(get_args(Polarity)),
    "sorts": list(get_args(BrowseSort)),
    "ratings": list(get_args(RatingState)),
    "sources": list(get_args(Source)),
    "scopes": list(get_args(Scope)),
}
_STATUS = {
    errors.NotFoundError: 404,
    errors.InputError: 400,
    errors.ConfigError: 409,
    errors.Retryable: 503,
}


class MemorySource(Protocol):
    """Where the dashboard's memory comes from: the service's keeper, or its own."""

    listeners: ChangeListeners

    @property
    def settings(self) -> Settings: ...

    def get(self) -> Memory: ...


class Changes:
    """A count of the changes this process made to the insights (bumped from any thread)."""

    def __init__(self) -> None:
        self.generation = 0

    def bump(self) -> None:
        self.generation += 1  # one int store: atomic under the GIL, and readers only compare


def _choice(value: str | None, allowed: Any, name: str) -> Any:
    if value in (None, ""):
        return None
    if value not in get_args(allowed):
        raise InputError(f"unknown {name} {value!r}: use one of {', '.join(get_args(allowed))}")
    return value


def _number(value: str | None, default: int, low: int, high: int, name: str) -> int:
    if value in (None, ""):
        return default
    try:
        number = int(value)
    except ValueError:
        raise InputError(f"{name} must be a whole number, not {value!r}") from None
    if not low <= number <= high:
        raise InputError(f"{name}={number} is out of range: {low} to {high}")
    return number


def build_app(source: MemorySource, launch: Launch, changes: Changes) -> ASGIApp:
    """The dashboard as an ASGI app behind its guard; `changes` counts this process's
    writes (the caller hangs it on the source for as long as the dashboard runs)."""
    cache: dict[str, tuple[Any, Any]] = {}

    async def run(work: Callable[[Memory], T]) -> T:
        return await anyio.to_thread.run_sync(lambda: work(source.get()))

    async def answer(work: Callable[[Memory], Any], status: int = 200) -> Response:
        try:
            result = await run(work)
        except MtlError as exc:
            code = next((c for kind, c in _STATUS.items() if isinstance(exc, kind)), 500)
            told = views.told(str(exc), source.settings)
            return JSONResponse({"error": views.shown(told)}, status_code=code)
        return JSONResponse(result, status_code=status)

    async def body(request: Request) -> dict[str, Any]:
        try:
            data = await request.json()
        except (ValueError, RecursionError):  # not JSON, or nested past Python's limit
            return {}
        return data if isinstance(data, dict) else {}

    def cached(memory: Memory, key: str, make: Callable[[], Any]) -> Any:
        """`make()` computed once per state of the memory (its changes stamp)."""
        stamp = memory.changes_stamp()
        hit = cache.get(key)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        value = make()
        cache[key] = (stamp, value)
        return value

    # -- the page ----------------------------------------------------------------------------

    async def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8")

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return JSONResponse({"error": "no such file"}, status_code=404)
        return FileResponse(STATIC / name, media_type=f"{STATIC_FILES[name]}; charset=utf-8")

    async def session(request: Request) -> Response:
        """GET: what the page needs to know (with the session). POST {"code": ...}: a
        one-time launch code traded for the session secret."""
        given: dict[str, Any] = {}
        if request.method == "POST":
            if not launch.redeem((await body(request)).get("code")):
                why = f"this link was used already or has expired: {NEW_LINK}"
                return JSONResponse({"error": why}, status_code=401)
            given = {"session": launch.session}

        def work(memory: Memory) -> dict[str, Any]:
            return {
                **given,
                "version": __version__,
                "team": memory.team is not None,
                "options": OPTIONS,
            }

        return await answer(work)

    # -- browse ------------------------------------------------------------------------------

    async def facets(request: Request) -> Response:
        def work(memory: Memory) -> Any:
            def make() -> Any:
                stats = memory.stats()
                return views.facets(stats, stats.get("team"))

            return cached(memory, "facets", make)

        return await answer(work)

    async def insights(request: Request) -> Response:
        q = request.query_params

        def work(memory: Memory) -> dict[str, Any]:
            sort: BrowseSort = _choice(q.get("sort"), BrowseSort, "sort") or "recent"
            text = q.get("text") or None
            limit = _number(q.get("limit"), 25, 1, PAGE_MAX, "limit")
            offset = _number(q.get("offset"), 0, 0, 10**9, "offset")
            start = time.perf_counter()
            items, total = memory.list(
                query=text if sort == "relevance" else None,
                text=None if sort == "relevance" else text,
                domain=q.get("domain") or None,
                project=q.get("project") or None,
                polarity=_choice(q.get("polarity"), Polarity, "polarity"),
                category=_choice(q.get("category"), Category, "category"),
                source=_choice(q.get("source"), Source, "source"),
                rating=_choice(q.get("rating"), RatingState, "rating"),
                sort=sort,
                limit=limit,
                offset=offset,
            )
            rows = views.listed(items)
            return {
                "items": rows,
                "total": total,
                "offset": offset,
                "limit": limit,
                "server_ms": round((time.perf_counter() - start) * 1000, 2),
            }

        return await answer(work)

    # -- one insight ---------------------------------------------------------------------------

    async def insight(request: Request) -> Response:
        insight_id = request.path_params["id"]

        def work(memory: Memory) -> Any:
            found = memory.get(insight_id)
            return views.shown(
                {
                    "insight": found,
                    "history": memory.history(insight_id),
                    "team": memory.team is not None,
                }
            )

        return await answer(work)

    def change(
        name: str, act: Callable[[Memory, str, dict[str, Any]], Any]
    ) -> Callable[[Request], Any]:
        async def route(request: Request) -> Response:
            insight_id = request.path_params["id"]
            data = await body(request)
            return await answer(
                lambda m: views.shown(views.without_paths(act(m, insight_id, data), m.settings))
            )

        route.__name__ = name
        return route

    # -- try a plan --------------------------------------------------------------------------

    async def preview(request: Request) -> Response:
        data = await body(request)

        def work(memory: Memory) -> Any:
            plan = data.get("plan")
            if not isinstance(plan, str):
                raise InputError("send the plan as text: {'plan': '...'}")
            k = data.get("k", 3)
            if not isinstance(k, int) or isinstance(k, bool):
                raise InputError("k must be a whole number from 1 to 20")
            scope: Scope = _choice(data.get("scope"), Scope, "scope") or "all"
            project = data.get("project") or None
            domains = data.get("domains") or None
            min_score = data.get("min_score")
            start = time.perf_counter()
            result = memory.preview(
                plan,
                k=k,
                scope=scope,
                project=project if isinstance(project, str) else None,
                domains=[str(d) for d in domains] if isinstance(domains, list) else None,
                min_score=float(min_score) if isinstance(min_score, int | float) else None,
            )
            from mtl_mcp.text.render import recall_text

            shaped = views.shown({**dict(result), "notes": recall_text(result.hits)})
            shaped["server_ms"] = round((time.perf_counter() - start) * 1000, 2)
            return shaped

        return await answer(work)

    # -- sessions ----------------------------------------------------------------------------

    async def sessions(request: Request) -> Response:
        def work(memory: Memory) -> Any:
            from mtl_mcp.learning.pipeline import ledger
            from mtl_mcp.learning.spool import Spool

            limit = _number(request.query_params.get("limit"), 20, 1, 200, "limit")
            used = ledger(memory.settings).by_backend()
            return {
                "sessions": views.shown(memory.sessions(limit)),
                "queue": views.queue(Spool(memory.settings).listing()),
                "spend": views.spend(
                    memory.settings,
                    {b: t for b, (t, _) in used.items()},
                    {b for b, (_, local) in used.items() if local},
                ),
                "loop": views.shown(memory.loop.ledger.figures()),
            }

        return await answer(work)

    async def retry(request: Request) -> Response:
        def work(memory: Memory) -> Any:
            from mtl_mcp.learning.spool import Spool

            return {"requeued": Spool(memory.settings).requeue_failed()}

        return await answer(work)

    # -- trials ------------------------------------------------------------------------------

    async def trial_list(request: Request) -> Response:
        return await answer(trials.trial_list)

    async def trial_page(request: Request) -> Response:
        trial_id = request.path_params["id"]
        return await answer(lambda memory: trials.trial_page(memory, trial_id))

    # -- upkeep: consolidation runs -------------------------------------------------------------

    async def consolidation(request: Request) -> Response:
        def work(memory: Memory) -> Any:
            settings = memory.settings
            return views.shown(
                {
                    "runs": memory.consolidation_runs(),
                    "conflicts": memory.open_conflicts(),
                    "retire_unused_days": settings.retire_unused_days,
                    "idle_seconds": settings.consolidate_idle_seconds,
                    "every_hours": settings.consolidate_every_hours,
                }
            )

        return await answer(work)

    async def consolidate(request: Request) -> Response:
        data = await body(request)

        def work(memory: Memory) -> Any:
            return views.shown(upkeep.run_pass(memory, data))

        return await answer(work)

    async def undo_run(request: Request) -> Response:
        run = request.path_params["run"]
        data = await body(request)
        return await answer(lambda m: views.shown(upkeep.undo(m, run, data)))

    # -- map ---------------------------------------------------------------------------------

    async def memory_map(request: Request) -> Response:
        def work(memory: Memory) -> Any:
            def make() -> Any:
                import pyarrow as pa

                drawn = views.memory_map(memory)
                pa.default_memory_pool().release_unused()  # the labels' columns, ~10 MB at 10k
                return drawn

            return cached(memory, "map", make)

        return await answer(work)

    # -- live --------------------------------------------------------------------------------

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            seen = changes.generation
            stamp = await run(lambda m: m.changes_stamp())
            last_stamp = last_ping = time.monotonic()
            yield "retry: 2000\n\n"
            while True:
                await anyio.sleep(POLL_SECONDS)
                now = time.monotonic()
                changed = changes.generation != seen
                if not changed and now - last_stamp >= STAMP_SECONDS:
                    last_stamp = now
                    current = await run(lambda m: m.changes_stamp())
                    changed, stamp = current != stamp, current
                if changed:
                    seen = changes.generation
                    yield f"event: change\ndata: {seen}\n\n"
                    last_ping = now
                elif now - last_ping >= PING_SECONDS:
                    last_ping = now
                    yield ": ping\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    routes = [
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/session", session, methods=["GET", "POST"]),
        Route("/api/facets", facets),
        Route("/api/insights", insights),
        Route("/api/insights/{id}", insight),
        Route("/api/preview", preview, methods=["POST"]),
        Route("/api/sessions", sessions),
        Route("/api/queue/retry", retry, methods=["POST"]),
        Route("/api/consolidation", consolidation),
        Route("/api/consolidation/run", consolidate, methods=["POST"]),
        Route("/api/consolidation/{run}/undo", undo_run, methods=["POST"]),
        Route("/api/map", memory_map),
        Route("/api/trials", trial_list),
        Route("/api/trials/{id}", trial_page),
        Route("/api/events", events),
    ]
    for name, act in ACTIONS.items():
        routes.append(Route(f"/api/insights/{{id}}/{name}", change(name, act), methods=["POST"]))
    app = Starlette(routes=routes)
    return Guard(app, launch)
