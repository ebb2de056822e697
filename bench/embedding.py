"""The plan embedding of the previous runtime against this one, in one process (see speed.py).

The previous runtime is rebuilt as it ran: its rewrite of the packaged graph, made by the
earlier tree's converter (`--before`), in a session with its options (the runtime's default
threads and spinning, SkipLayerNormFusion on). The two are timed call by call, alternating,
on the 3-sentence plans recall embeds (a batch of their sentences); then each runs the
shipped evaluation set's test split through `Memory.recall`, and the two runtimes' vectors
are compared over its pool and plan sentences.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchmark import PLANS

from mtl_mcp.config import DEFAULT_EMBED_MODEL, PREVIOUS_EMBED_MODEL, load_settings
from mtl_mcp.index.embedder import MiniLMEmbedder, _derived_name, _packaged_model, get_embedder
from mtl_mcp.index.methods import plan_sentences, plan_vector
from mtl_mcp.quality.evaluation import evaluate, load_pool, load_queries, shipped_set


def previous_session(model_file: Path) -> Any:
    """A session with the previous release's options (embedder._onnx_session of 0.3)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_cpu_mem_arena = False
    options.enable_mem_pattern = False
    return ort.InferenceSession(
        str(model_file), sess_options=options, providers=["CPUExecutionProvider"]
    )


def previous_runtime(before: Path, models: Path) -> MiniLMEmbedder:
    """The previous runtime: the earlier tree's rewrite, run with its session options."""
    source, sha256 = _packaged_model()
    derived = _derived_name(models, sha256, version=1)
    if not derived.is_file():
        env = {**os.environ, "PYTHONPATH": str(before)}
        # -P: never this directory's mtl_mcp, which would shadow the earlier tree's.
        command = [
            sys.executable,
            "-P",
            "-m",
            "mtl_mcp.index.int8_graph",
            str(source),
            str(derived),
        ]
        subprocess.run(command, env=env, check=True, stdin=subprocess.DEVNULL)
    embedder = get_embedder(load_settings(models.parent), PREVIOUS_EMBED_MODEL)
    assert isinstance(embedder, MiniLMEmbedder) and embedder.model_file == derived
    embedder._session = previous_session(derived)  # the bench's only reach into its innards
    return embedder


def timed(embedders: dict[str, Any], reps: int) -> dict[str, dict[str, float]]:
    """Wall and CPU time of a plan's embedding, alternating runtimes call by call."""
    wall: dict[str, list[float]] = {name: [] for name in embedders}
    cpu: dict[str, list[float]] = {name: [] for name in embedders}
    for n in range(reps):
        plan = PLANS[n % len(PLANS)]
        for name, embedder in embedders.items():
            used, start = time.process_time(), time.perf_counter()
            plan_vector(embedder, plan, split=True)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - used)
    return {
        name: {
            "plan_p50_ms": round(statistics.median(wall[name]) * 1000, 2),
            "plan_p10_ms": round(float(np.percentile(wall[name], 10)) * 1000, 2),
            "plan_cpu_p50_ms": round(statistics.median(cpu[name]) * 1000, 2),
        }
        for name in embedders
    }


def quality(name: str) -> dict[str, Any]:
    pool, queries = shipped_set()
    [result] = evaluate(
        pool, queries, methods=["mtl"], split="test", embed_model=name, details=True
    )
    return {
        "p_at_3": result.precision_at_k,
        "hit_at_3": result.hit_at_k,
        "mrr": result.mrr,
        "top3": {q.id: q.retrieved for q in result.per_query or []},
    }


def compared(before: Any, after: Any) -> dict[str, Any]:
    """Cosine between the two runtimes' vectors of every pool insight and plan sentence."""
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    texts = [item.draft.embedding_text() for item in pool]
    texts += [s for q in load_queries(queries_path, pool) for s in plan_sentences(q.plan)]
    cosines = np.sum(before.embed_documents(texts) * after.embed_documents(texts), axis=1)
    return {
        "texts": len(texts),
        "cosine_min": round(float(cosines.min()), 5),
        "cosine_median": round(float(np.median(cosines)), 6),
    }


def embedding_section(before: Path | None, work: Path, quick: bool) -> dict[str, Any]:
    models = work / "embedding-home" / "models"
    models.mkdir(parents=True, exist_ok=True)
    after = get_embedder(load_settings(models.parent))
    embedders: dict[str, Any] = {"after": after}
    if before is not None:
        embedders = {"before": previous_runtime(before, models), "after": after}
    for embedder in embedders.values():
        plan_vector(embedder, PLANS[0], split=True)
    result: dict[str, Any] = {"runtimes": timed(embedders, 100 if quick else 400)}
    names = {"before": PREVIOUS_EMBED_MODEL, "after": DEFAULT_EMBED_MODEL}
    result["quality"] = {label: quality(names[label]) for label in embedders}
    if before is not None:
        runtimes, scores = result["runtimes"], result["quality"]
        result["after_over_before"] = {
            key: round(runtimes["after"][key] / runtimes["before"][key], 3)
            for key in ("plan_p50_ms", "plan_p10_ms", "plan_cpu_p50_ms")
        }
        result["vectors"] = compared(embedders["before"], after)
        result["same_top3"] = sum(
            scores["before"]["top3"][q] == top for q, top in scores["after"]["top3"].items()
        )
        result["queries"] = len(scores["after"]["top3"])
    for entry in result["quality"].values():
        entry.pop("top3")
    return result
