"""The relevance gate of what is put before a model unasked, measured on the shipped
evaluation set (dev + test, leave-one-domain-out, the top 3 of the default method).

Every top-3 hit of every query is labelled relevant or not. A gate keeps some of them; it is
scored by the precision of the notes it keeps and the share of plans that still get one.
Compared: the relevance gate at every threshold (on dev out-of-fold, from fits that did not
see the query's domain; on test, the shipped fit), 0.3's cosine floor, and the simple gates
over the signals recall already has. P@3, the ranking's own figure, is measured beside it.

    python bench/relevance_floor.py --fit   # refit the gate on dev: writes mtl_mcp/data/gate.json
    python bench/relevance_floor.py         # writes bench-results/relevance_floor.json
    python bench/relevance_floor.py --hook  # ... and measures through `mtl-mcp hook tool-use`

`--fit` is deterministic: rerun it whenever the embedding runtime changes, then this.

The hook path (`--hook`): for each domain, a store of the pool without that domain and a
warm service for it; each of the domain's plans goes through `mtl-mcp hook tool-use` as a
Claude Code PostToolUse payload with a transcript in Claude Code's shape, a new session
each, and the notes it injected (the session state's `shown`) are scored. Where the hook's
budget ran out (the service busy), the same task's next tool call is sent, as Claude Code
would. Each plan is also recalled in-process on the same store (`Memory.recall_for_session`):
the two must inject the same notes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from mtl_mcp.config import load_settings
from mtl_mcp.index.gate import SIGNALS, shipped_gate, shipped_gate_path
from mtl_mcp.memory import Memory
from mtl_mcp.operations.service import ensure_service, request, stop_services
from mtl_mcp.quality.evaluation import (
    EvalQuery,
    evaluate,
    load_pool,
    load_queries,
    shipped_set,
    throwaway_store,
)
from mtl_mcp.quality.gate_fit import (
    L2_GRID,
    Labelled,
    ShippedFit,
    choose_threshold,
    figures,
    fit_logistic,
    fit_shipped,
    labelled_hits,
    log_loss,
)
from mtl_mcp.schemas import RecallOrigin

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench-results" / "relevance_floor.json"
MTL_MCP = str(Path(sys.executable).with_name("mtl-mcp"))
FLOORS = [round(0.20 + 0.025 * n, 3) for n in range(13)]  # 0.3's cosine floor, 0.20 .. 0.50
TOOL_CALLS = 4  # tool calls of one task sent to the hook at most

Keep = Callable[[Labelled], bool]


def _rank(part: dict[str, Any], name: str) -> int:
    value = part.get(name)
    return int(value) if value is not None else 10**6


SIMPLE_GATES: dict[str, Keep] = {
    "cosine >= 0.40 (0.3's floor)": lambda h: h.parts["similarity"] >= 0.40,
    "cosine >= 0.45": lambda h: h.parts["similarity"] >= 0.45,
    "rank 1 only": lambda h: h.rank == 1,
    "dense rank <= 3 and keyword rank <= 3": lambda h: (
        _rank(h.parts, "dense_rank") <= 3 and _rank(h.parts, "keyword_rank") <= 3
    ),
    "every top-3 note": lambda h: True,
}


def simple_gates(hits: Sequence[Labelled]) -> dict[str, dict[str, dict[str, float]]]:
    return {
        name: {
            split: figures(chosen, [keep(h) for h in chosen])
            for split, chosen in _splits(hits).items()
        }
        for name, keep in SIMPLE_GATES.items()
    }


def _splits(hits: Sequence[Labelled]) -> dict[str, list[Labelled]]:
    return {
        "dev": [h for h in hits if h.split == "dev"],
        "test": [h for h in hits if h.split == "test"],
        "all": list(hits),
    }


def floor_curve(hits: Sequence[Labelled]) -> dict[str, list[dict[str, float]]]:
    """0.3's cosine floor at every floor of FLOORS, applied to the top 3."""
    return {
        split: [
            {"floor": f, **figures(chosen, [h.parts["similarity"] >= f for h in chosen])}
            for f in FLOORS
        ]
        for split, chosen in _splits(hits).items()
        if split != "all"
    }


def signal_sets(hits: Sequence[Labelled]) -> list[dict[str, Any]]:
    """Out-of-fold log loss on dev (by domain) of the gate's signals and of the others
    tried, one added at a time: what earned a place and what did not."""
    dev = [h for h in hits if h.split == "dev"]
    columns: dict[str, Callable[[Labelled], float]] = {
        "cosine": lambda h: h.parts["similarity"],
        "similarity_z": lambda h: h.signals[0],
        "keyword": lambda h: h.signals[1],
        "log dense rank": lambda h: _log(_rank(h.parts, "dense_rank")),
        "log keyword rank": lambda h: _log(min(_rank(h.parts, "keyword_rank"), 200)),
        "both ranks <= 3": lambda h: float(
            _rank(h.parts, "dense_rank") <= 3 and _rank(h.parts, "keyword_rank") <= 3
        ),
        "fused score x 1000": lambda h: 1000 * h.parts["fused"],
        "margin to the next fused score x 1000": lambda h: 1000 * _margin(h, dev),
    }
    sets = [["cosine"], ["similarity_z"], ["similarity_z", "keyword"]]
    sets += [["similarity_z", "keyword", name] for name in list(columns)[3:]]
    return [
        {"signals": names, **_cross_validated(dev, [columns[n] for n in names])} for names in sets
    ]


def _log(value: float) -> float:
    import math

    return math.log(value)


def _margin(hit: Labelled, hits: Sequence[Labelled]) -> float:
    following = [h for h in hits if h.query == hit.query and h.rank == hit.rank + 1]
    return hit.parts["fused"] - (following[0].parts["fused"] if following else 0.0)


def _cross_validated(
    hits: Sequence[Labelled], columns: Sequence[Callable[[Labelled], float]]
) -> dict[str, float]:
    import numpy as np

    x = np.array([[c(h) for c in columns] for h in hits], dtype=np.float64)
    y = np.array([h.relevant for h in hits], dtype=np.float64)
    domains = np.array([h.domain for h in hits])
    best = None
    for l2 in L2_GRID:
        chances = np.zeros(len(hits))
        for domain in sorted(set(domains)):
            held = domains == domain
            chances[held] = fit_logistic(x[~held], y[~held], l2).probabilities(x[held])
        loss = log_loss(chances, y)
        if best is None or loss < best["log_loss"]:
            best = {"log_loss": round(loss, 4), "l2": l2}
    assert best is not None
    return best


def separability(hits: Sequence[Labelled], l2: float) -> dict[str, float]:
    """Why test is harder: a fit on dev and test together, each domain scored by a fit
    without it, and how well its probabilities separate relevant hits from the rest (AUC)
    on each split. Not a fit anyone ships: a measure of the signals, not of the choice."""
    import numpy as np

    from mtl_mcp.quality.gate_fit import out_of_fold

    chances = out_of_fold(hits, l2)
    found = {}
    for split in ("dev", "test"):
        mine = np.array([h.split == split for h in hits])
        good = np.array([h.relevant for h in hits]) & mine
        bad = ~np.array([h.relevant for h in hits]) & mine
        wins = chances[good][:, None] > chances[bad][None, :]
        ties = chances[good][:, None] == chances[bad][None, :]
        found[f"{split}_auc"] = round(float((wins + 0.5 * ties).mean()), 3)
    return found


def ranking_quality() -> dict[str, float]:
    """P@3 and hit@3 of the ranking itself, which the gate does not touch."""
    pool, queries = shipped_set()
    found = {}
    for split in ("dev", "test"):
        (run,) = evaluate(pool, queries, split=split)  # type: ignore[arg-type]
        found[f"{split}_precision_at_3"] = run.precision_at_k
        found[f"{split}_hit_at_3"] = run.hit_at_k
    return found


# -- through the hook ------------------------------------------------------------------------


def transcript_payload(folder: Path, session: str, query: EvalQuery, call: int) -> str:
    """A Claude Code PostToolUse payload for the `call`-th tool call of the query's task (its
    prompt the task text, its plan stated before the first call), with its transcript
    (Claude Code's JSONL) written beside it."""
    transcript = folder / f"{session}.jsonl"
    prompt, plan = query.task or query.plan, query.plan
    lines: list[dict[str, Any]] = [
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": prompt}},
        {"type": "assistant", "message": {"content": [{"type": "text", "text": plan}]}},
    ]
    for n in range(1, call + 1):
        use = {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": "a"}}
        lines.append({"type": "assistant", "message": {"content": [use]}})
        if n < call:
            result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": "..."}
            lines.append({"type": "user", "message": {"role": "user", "content": [result]}})
    transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return json.dumps(
        {
            "session_id": session,
            "transcript_path": str(transcript),
            "cwd": str(folder),
            "prompt_id": "u1",
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_input": {"file_path": "a"},
            "tool_response": "...",
            "tool_use_id": f"t{call}",
        }
    )


@contextlib.contextmanager
def domain_store(pool: Sequence[Any], domain: str, home: Path) -> Iterator[dict[str, str]]:
    """A data directory holding the pool without `domain`, a warm service for it; yields
    pool id -> store id."""
    env = {**os.environ, "MTL_MCP_HOME": str(home), "MTL_MCP_STARTER": "0"}
    settings = load_settings(home, starter=False)
    memory = Memory(settings)
    kept = [item for item in pool if item.draft.domain != domain]
    results = memory.import_insights([item.draft for item in kept])
    memory.close()
    ids = {item.id: r.id for item, r in zip(kept, results, strict=True) if r.id}
    old = dict(os.environ)
    os.environ.update(env)
    try:
        sock, _ = ensure_service(load_settings(home), "status")
        sock.close()
        warm = request(load_settings(home), "call", method="recall", params={"plan": "warm"})
        assert warm and warm.get("ok"), warm
        yield ids
    finally:
        stop_services(home)
        os.environ.clear()
        os.environ.update(old)


def hook_notes(home: Path, session: str, query: EvalQuery, folder: Path) -> tuple[list[str], int]:
    """The ids the hook injected for the query's plan, and after how many tool calls."""
    env = {**os.environ, "MTL_MCP_HOME": str(home), "MTL_MCP_STARTER": "0"}
    state = home / "hooks" / f"{session}.json"
    for call in range(1, TOOL_CALLS + 1):
        raw = transcript_payload(folder, session, query, call)
        subprocess.run(
            [MTL_MCP, "hook", "tool-use"],
            input=raw,
            text=True,
            env=env,
            capture_output=True,
            timeout=60,
        )
        data = json.loads(state.read_text()) if state.exists() else {}
        if data.get("done"):
            return list(data.get("shown", [])), call
    return [], TOOL_CALLS


def hook_path(queries: Sequence[EvalQuery], pool: Sequence[Any]) -> dict[str, Any]:
    """Every plan through the hook, one store per left-out domain; each also in-process."""
    per_query = []
    with tempfile.TemporaryDirectory(prefix="mtl-gate-hook-") as scratch:
        for domain in sorted({q.domain for q in queries}):
            home = Path(scratch) / domain
            with domain_store(pool, domain, home) as ids:
                memory = Memory(load_settings(home, starter=False))
                for query in (q for q in queries if q.domain == domain):
                    session = f"bench-{query.id}"
                    shown, calls = hook_notes(home, session, query, Path(scratch))
                    origin = RecallOrigin(session_id=f"lib-{query.id}", trigger="hook")
                    library = memory.recall_for_session(query.plan, origin) or []
                    relevant = {ids[r] for r in query.relevant if r in ids}
                    per_query.append(
                        {
                            "id": query.id,
                            "split": query.split,
                            "hook": shown,
                            "library": [h.id for h in library],
                            "relevant": [i for i in shown if i in relevant],
                            "tool_calls": calls,
                        }
                    )
                memory.close()
    result: dict[str, Any] = {"agree": all(q["hook"] == q["library"] for q in per_query)}
    for split in ("dev", "test", "all"):
        chosen = [q for q in per_query if split == "all" or q["split"] == split]
        notes = sum(len(q["hook"]) for q in chosen)
        relevant = sum(len(q["relevant"]) for q in chosen)
        result[split] = {
            "notes": notes,
            "relevant_notes": relevant,
            "precision": round(relevant / notes, 3) if notes else 0.0,
            "plans_with_a_note": round(sum(bool(q["hook"]) for q in chosen) / len(chosen), 3),
            "after_a_later_tool_call": sum(q["tool_calls"] > 1 for q in chosen),
        }
    result["per_query"] = per_query
    return result


def _every_note(fit: ShippedFit) -> dict[str, Any]:
    min_p = choose_threshold(fit.dev_curve_every)
    return {
        "min_p": min_p,
        "dev_out_of_fold": next(p for p in fit.dev_curve_every if p["min_p"] == min_p),
        "test": next(p for p in fit.test_curve_every if p["min_p"] == min_p),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fit", action="store_true", help="Refit the shipped gate on dev.")
    parser.add_argument("--hook", action="store_true", help="Measure through the hook too.")
    args = parser.parse_args()
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    queries = load_queries(queries_path, pool)
    with throwaway_store(pool) as evalset:
        hits = labelled_hits(evalset, queries)
    fit = fit_shipped(hits)
    if args.fit:
        shipped_gate_path().write_text(json.dumps(fit.gate.to_json(), indent=2) + "\n")
        print("wrote", shipped_gate_path(), fit.gate)
    elif fit.gate.weights != shipped_gate().weights:
        print("note: the shipped gate differs from a fit now: run with --fit", file=sys.stderr)
    gate = shipped_gate()
    chosen_test = next(p for p in fit.test_curve if p["min_p"] == fit.min_p)
    chosen_dev = next(p for p in fit.dev_curve if p["min_p"] == fit.min_p)
    result: dict[str, Any] = {
        "gate": gate.to_json(),
        "signals": list(SIGNALS),
        "l2": fit.l2,
        "cross_validation": fit.cross_validation,
        "signal_sets": signal_sets(hits),
        "chosen": {
            "min_p": fit.min_p,
            "why": "the lowest threshold whose out-of-fold dev notes (one a plan at most, the"
            " most probable) reach precision 0.75 with half of the plans getting one",
            "dev_out_of_fold": chosen_dev,
            "test": chosen_test,
        },
        "gate_curve": {"dev_out_of_fold": fit.dev_curve, "test": fit.test_curve},
        # The same gate letting every note that reaches the threshold through (as first
        # built), its threshold chosen on dev by the same rule: what one note a plan adds.
        "gate_curve_every_note": {
            "dev_out_of_fold": fit.dev_curve_every,
            "test": fit.test_curve_every,
        },
        "every_note": _every_note(fit),
        "simple_gates": simple_gates(hits),
        "floor_curve": floor_curve(hits),
        "ranking": ranking_quality(),
        "separability_all_queries_out_of_fold": separability(hits, fit.l2),
    }
    if args.hook:
        result["hook"] = hook_path(queries, pool)
    elif OUT.exists():
        with contextlib.suppress(ValueError, KeyError):
            result["hook"] = json.loads(OUT.read_text())["hook"]  # kept from the last --hook
    OUT.write_text(json.dumps(result, indent=2) + "\n")
    shown = ("gate", "chosen", "ranking", "separability_all_queries_out_of_fold")
    print(json.dumps({k: result[k] for k in shown}, indent=2))
    for name, row in result["simple_gates"].items():
        print(f"{name:45} " + "  ".join(f"{s} {row[s]}" for s in ("dev", "test")))
    for row in result["signal_sets"]:
        print(row)
    if "hook" in result:
        print("hook", {k: v for k, v in result["hook"].items() if k != "per_query"})


if __name__ == "__main__":
    main()
