"""Feedback from session verdicts: how its constants were chosen, and what it does.

    python bench/feedback.py [--out bench-results/feedback.json] [--seeds 20]

1. Tuning, on the dev split only: two-fold cross-validation (dev queries alternately in
   fold A and B; the verdicts of one fold's sessions, the recall of the other). A grid over
   the ramp (`floor`, `full`), the misled mass needed (`suppress_at`) and retirement
   (`retire_kinds`), plus a hard cut (full weight above one cosine) and the global limit
   (every misled verdict counts in full for every plan). Each is run on two throwaway
   stores, the shipped pool with the planted bad insights and the shipped pool alone, at
   verdict noise 0, 0.1 and 0.3 (10 draws). The objective, "net slots": over the held-out
   top 3s, +1 for each misleading planted insight removed and +1 for each relevant insight
   gained (a relevant one pushed out counts -1), on both stores, at noise 0.1; noise 0.3
   as the check. The ten best, and the forms of step 2, are checked again leaving one dev
   query out (its recall with the verdicts of the other 35 sessions, as many as test gets).
2. The chosen constants (`mtl_mcp.memory.feedback`), and for reference the global limit
   and a narrow ramp: sessions on dev, recall of test (and of dev, in sample), at noise 0,
   0.1 and 0.2 (`--seeds` draws), with a paired bootstrap over test queries of the change
   in P@3 and in planted hits.

`mtl-mcp eval --feedback [--planted] [--noise R]` runs step 2 for one setting.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the CLI does: see bench/benchmark.py

import numpy as np

from mtl_mcp.memory import feedback
from mtl_mcp.quality.evaluation import (
    EvalQuery,
    load_pool,
    load_queries,
    select,
    shipped_set,
    throwaway_store,
)
from mtl_mcp.quality.feedback_eval import (
    FeedbackLab,
    compare,
    feedback_index,
    load_planted,
    shipped_planted,
)

ROOT = Path(__file__).resolve().parent.parent
NOISES = (0.0, 0.1, 0.2)
TUNING_NOISES = (0.1, 0.3)
NEVER = 99  # retire_kinds that never retires
# Also reported on test, beside the chosen constants: the no-ramp limit and a narrow ramp.
LOO_TOP = 10  # the best of the two-fold ranking, checked again leaving one query out
REFERENCE_FORMS = ("global: any misled verdict, anywhere", "ramp 0.40-0.50, M>=0.5, retire 3")


def grid() -> dict[str, dict[str, float]]:
    """Every configuration tried on dev, by name."""
    configs: dict[str, dict[str, float]] = {}
    for floor, width, suppress_at, retire in itertools.product(
        (0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50),
        (0.10, 0.15, 0.20, 0.30, 0.40),
        (0.25, 0.5, 1.0),
        (2, 3, NEVER),
    ):
        name = f"ramp {floor:.2f}-{floor + width:.2f}, M>={suppress_at}, retire {retire}"
        configs[name] = {
            "floor": floor,
            "full": round(floor + width, 2),
            "suppress_at": suppress_at,
            "retire_kinds": retire,
        }
    for cut in (0.45, 0.50, 0.55):  # a hard cut: w = 1 at cosine >= cut, else 0
        configs[f"hard cut {cut:.2f}, M>=1, retire 3"] = {
            "floor": cut - 1e-3,
            "full": cut,
            "suppress_at": 1.0,
            "retire_kinds": 3,
        }
    configs["global: any misled verdict, anywhere"] = {
        "floor": -1.0,
        "full": -0.999,
        "suppress_at": 1.0,
        "retire_kinds": NEVER,
    }
    return configs


def folds(dev: list[EvalQuery]) -> tuple[list[EvalQuery], list[EvalQuery]]:
    ordered = sorted(dev, key=lambda q: q.id)
    return ordered[0::2], ordered[1::2]


def cross_validate(
    labs: dict[str, FeedbackLab], dev: list[EvalQuery], config: dict[str, float], seeds: int
) -> dict[str, float]:
    """Both folds' held-out figures, summed (planted hits) or averaged (P@3)."""
    a, b = folds(dev)
    out: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        out.setdefault(name, []).append(value)

    for sessions, scored in ((a, b), (b, a)):
        for noise in (0.0, *TUNING_NOISES):
            runs = seeds if noise else 1
            for store, lab in labs.items():
                run, _, _ = compare(lab, sessions, scored, noise=noise, seeds=runs, form=config)
                tag = f"{store} {noise}"
                if store == "planted":
                    add(f"{tag}: misleading in top 3", run.on.planted_on_targets)
                    if not noise:
                        add("planted off: misleading in top 3", run.off.planted_on_targets)
                add(f"{tag}: relevant left out", run.on.relevant_left_out)
                add(f"{tag}: P@3 change", run.on.precision_at_k - run.off.precision_at_k)
    return {
        name: round(sum(v) if "P@3" not in name else statistics.fmean(v), 4)
        for name, v in out.items()
    }


def net_slots(figures: dict[str, float], noise: float) -> float:
    """The change in top-3 slots over both folds: +1 for each relevant insight gained (on
    both stores), +1 for each misleading one removed."""
    slots = 3 * 36  # both folds together hold every dev query once
    removed = figures["planted off: misleading in top 3"]
    removed -= figures[f"planted {noise}: misleading in top 3"]
    gained = slots * (
        figures[f"planted {noise}: P@3 change"] + figures[f"clean {noise}: P@3 change"]
    )
    return round(removed + gained, 2)


def leave_one_out(
    labs: dict[str, FeedbackLab], dev: list[EvalQuery], form: dict[str, float], seeds: int
) -> dict[str, float]:
    """Net slots when each dev query is recalled with the verdicts of the other 35 sessions:
    as many sessions as the test split gets, where two folds give only 18."""
    result: dict[str, float] = {}
    for noise in (0.0, *TUNING_NOISES):
        runs = seeds if noise else 1
        total = 0.0
        for seed, lab in itertools.product(range(runs), labs.values()):
            base = lab.score(dev, None)
            sessions = {q.id: lab.verdicts([q], noise, 1000 * seed + n) for n, q in enumerate(dev)}
            for query in dev:
                others = [v for qid, got in sessions.items() if qid != query.id for v in got]
                row = lab.score([query], feedback_index(others, form))[query.id]
                total += lab.k * (row.precision - base[query.id].precision)
                total += base[query.id].on_targets - row.on_targets
        result[f"net slots, noise {noise}"] = round(total / runs, 2)
    return result


def bootstrap(pairs: dict[str, list[float]], resamples: int = 10_000) -> dict[str, float]:
    """Mean paired difference on - off over queries, and its 95% percentile interval."""
    diff = np.array([on - off for off, on in pairs.values()])
    rng = np.random.default_rng(0)
    means = diff[rng.integers(0, len(diff), (resamples, len(diff)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return {"mean": round(float(diff.mean()), 4), "low": round(low, 4), "high": round(high, 4)}


def final(
    labs: dict[str, FeedbackLab],
    dev: list[EvalQuery],
    test: list[EvalQuery],
    seeds: int,
    form: dict[str, float],
) -> dict[str, Any]:
    """One form: dev sessions, test (and dev) recall, at every noise rate."""
    result: dict[str, Any] = {}
    for store, noise in itertools.product(labs, NOISES):
        runs = seeds if noise else 1
        lab = labs[store]
        out, verdicts, indexes = compare(
            lab, dev, test, noise=noise, seeds=runs, details=True, form=form
        )
        inside, _, _ = compare(
            lab, dev, dev, noise=noise, seeds=runs, names=("dev", "dev"), form=form
        )
        pool_ids = lab.evalset.pool_ids
        entry = {
            "test": {"off": out.off.model_dump(), "on": out.on.model_dump()},
            "dev_in_sample": {"off": inside.off.model_dump(), "on": inside.on.model_dump()},
            "bootstrap_test_p3": bootstrap(out.per_query_precision or {}),
            "retired_first_seed": {
                pool_ids.get(i, i): why for i, why in indexes[0].keeps_misleading().items()
            },
            "misled_verdicts_per_seed": statistics.fmean(
                sum(v.verdict == "misled" for v in run) for run in verdicts
            ),
        }
        if store == "planted":
            entry["bootstrap_test_planted"] = bootstrap(out.per_query_planted or {})
            seen = {v.insight for v in verdicts[0] if v.verdict == "misled"}
            entry["test_planted_off_from_insights_that_misled_on_dev"] = sum(
                lab.is_planted(i) and i in seen for q in test for i in lab.top(q)
            )
        result[f"{store}, noise {noise}"] = entry
        print(form, store, noise, json.dumps(entry["test"]), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "feedback.json")
    parser.add_argument("--seeds", type=int, default=20, help="Noise draws in step 2.")
    parser.add_argument("--tuning-seeds", type=int, default=5, help="Noise draws in step 1.")
    args = parser.parse_args()
    pool_path, queries_path = shipped_set()
    pool = load_pool(pool_path)
    queries = load_queries(queries_path, pool)
    planted = load_planted(shipped_planted(), pool, queries)
    dev, test = select(queries, "dev"), select(queries, "test")
    started = time.perf_counter()
    with (
        throwaway_store(pool) as clean_store,
        throwaway_store([*pool, *planted]) as planted_store,
    ):
        labs = {
            "clean": FeedbackLab(clean_store, {}),
            "planted": FeedbackLab(planted_store, {p.id: p for p in planted}),
        }
        tuning: dict[str, dict[str, float]] = {}
        for name, config in grid().items():
            tuning[name] = {**config, **cross_validate(labs, dev, config, args.tuning_seeds)}
        for figures in tuning.values():
            figures["net slots, noise 0.1"] = net_slots(figures, 0.1)
            figures["net slots, noise 0.3"] = net_slots(figures, 0.3)
        ranked = sorted(tuning.items(), key=lambda kv: -kv[1]["net slots, noise 0.1"])
        for name, figures in ranked[:25]:
            print(name, json.dumps(figures), flush=True)
        chosen = {
            "floor": feedback.FLOOR,
            "full": feedback.FULL,
            "suppress_at": feedback.SUPPRESS_AT,
            "retire_kinds": feedback.RETIRE_KINDS,
        }
        forms = {"chosen": chosen, **{name: grid()[name] for name in REFERENCE_FORMS}}
        checked = {name: grid()[name] for name, _ in ranked[:LOO_TOP]} | forms
        loo = {
            name: leave_one_out(labs, dev, form, args.tuning_seeds)
            for name, form in checked.items()
        }
        for name, figures in loo.items():
            print("leave one out:", name, json.dumps(figures), flush=True)
        results = {
            "chosen": chosen,
            # The grid's best 25 and the reference forms: the whole grid is ~450 rows.
            "tuning_cv_on_dev": {
                name: figures
                for name, figures in tuning.items()
                if name in dict(ranked[:25]) or name in REFERENCE_FORMS
            },
            "grid_size": len(tuning),
            "leave_one_out_on_dev": loo,
            "final": {
                name: final(labs, dev, test, args.seeds, form) for name, form in forms.items()
            },
            "seconds": round(time.perf_counter() - started, 1),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
