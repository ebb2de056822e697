"""The figures in README.md and docs/*.md, rewritten from bench-results/*.json.

    python bench/figures.py            # rewrite every figure in place
    python bench/figures.py --check    # write nothing; exit 1 naming each stale figure

A figure sits between markers, on lines of their own (a table or a list) or inline (a number
in a sentence):

    <!-- figures:peers -->
    | ... the table this script writes ... |
    <!-- /figures -->

so no number measured by a benchmark is typed by hand: rerun the benchmark, then this.
Each figure below reads the JSON files its benchmark writes; the "0.1" baselines and the
targets are not measurements of this code, so they are written here.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench-results"
MARKER = re.compile(r"<!-- figures:(?P<name>[\w-]+) -->(?P<body>.*?)<!-- /figures -->", re.S)


@cache
def result(name: str) -> Any:
    return json.loads((RESULTS / f"{name}.json").read_text(encoding="utf-8"))


def num(value: float, digits: int = 0) -> str:
    """1234.5 -> '1,234' (digits=0), 0.3148 -> '0.315' (digits=3)."""
    return f"{value:,.{digits}f}"


def pct(value: float) -> str:
    return f"{value * 100:.0f}%"


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def storm_lost(run: dict[str, Any]) -> int:
    """Insights acknowledged by the storm's writers but missing from the table afterwards."""
    return run["writers"] * run["per_writer"] - (run["insights_after"] - run["insights_before"])


# Headline (README) ----------------------------------------------------------------------


def headline() -> str:
    bench, stress, hooks = result("results"), result("stress"), result("hooks")
    handshake, r10, r100 = bench["handshake"], bench["recall_10000"], bench["recall_100000"]
    methods = result("retrieval")["methods"]
    planted = result("feedback")["final"]["chosen"]["planted, noise 0.0"]["test"]
    mtl, dense = methods["mtl"]["test"], methods["dense"]["test"]
    gain = mtl["precision_at_k"] / dense["precision_at_k"] - 1
    return "\n".join(
        [
            f"- A new window is ready in **{num(handshake['window_service_warm_median_ms'])} ms**"
            " with the shared service warm (the official Node memory server:"
            f" {num(handshake['node_memory_server_median_ms'])} ms), and holds"
            f" {num(r10['window_rss_mb'])} MB.",
            f"- Recall answers a 3-sentence plan in **{num(r10['recall_p50_ms'], 1)} ms**"
            " (p50 over MCP stdio) at 10,000 insights,"
            f" {num(r100['recall_p50_ms'], 1)} ms at 100,000.",
            f"- On the shipped evaluation set's test split, precision@3 is"
            f" **{num(mtl['precision_at_k'], 3)}** against {num(dense['precision_at_k'], 3)}"
            f" for plain embedding search (+{pct(gain)}); hit@3 {num(mtl['hit_at_k'], 3)}.",
            f"- The plan hook costs **{num(hooks['nothing_to_do_ms'])} ms** on a tool call with"
            f" nothing to do, and adds {num(hooks['recall_warm_added_ms'])} ms to the one that"
            " recalls.",
            f"- Session verdicts cut planted bad lessons in the test top 3 from"
            f" {num(planted['off']['planted_on_targets'])} to"
            f" **{num(planted['on']['planted_on_targets'])}**, with no extra model call.",
            f"- {stress['writers']} windows writing {stress['writers'] * stress['per_writer']}"
            f" insights at once: **{storm_lost(stress)} lost**, {len(stress['errors'])} errors.",
        ]
    )


# Benchmarks (docs/benchmarks.md) --------------------------------------------------------


def benchmarks() -> str:
    bench, stress, solo = result("results"), result("stress"), result("stress-in-process")
    hs, r10, r100, imp = (
        bench[k] for k in ("handshake", "recall_10000", "recall_100000", "import")
    )
    rows = [
        [
            "a new window's handshake (spawn -> `initialize` + `tools/list`), service warm",
            "0.67 s",
            f"**{num(hs['window_service_warm_median_ms'], 1)} ms** (the official Node memory"
            f" server: {num(hs['node_memory_server_median_ms'])} ms)",
            "<= 0.2 s, faster than Node's",
        ],
        [
            "the same with no service running (the window starts it)",
            "1.01x a bare `MCPServer`",
            f"**{num(hs['no_service_over_bare'], 2)}x**"
            f" ({num(hs['window_no_service_median_ms'])} ms vs {num(hs['bare_median_ms'])} ms);"
            f" in-process fallback {num(hs['in_process_over_bare'], 2)}x",
            "within 1.2x",
        ],
        [
            "resident memory of one window (the relay)",
            "~425-525 MB",
            f"**{num(r10['window_rss_mb'])} MB**",
            "<= 30 MB",
        ],
        [
            "the service at 10k / 100k insights (RSS)",
            "525 / 1,004 MB per window",
            f"**{num(r10['service_rss_mb'])} / {num(r100['service_rss_mb'])} MB** in total",
            "<= 300 / <= 450 MB",
        ],
        [
            "first recall in a new window, service warm",
            "~2 s",
            f"**{num(r10['first_recall_new_window_ms'], 1)} ms** (10k),"
            f" {num(r100['first_recall_new_window_ms'], 1)} ms (100k)",
            "<= 30 ms",
        ],
        [
            "warm recall p50 over stdio at 10k, 3-sentence plan",
            "16-26 ms",
            f"**{num(r10['recall_p50_ms'], 1)} ms** (p90 {num(r10['recall_p90_ms'], 1)} ms);"
            f" in-process {num(r10['in_process_recall_p50_ms'], 1)} ms, of which the plan's"
            f" embedding ~{num(r10['query_embed_p50_ms'])} ms",
            "<= 12 ms",
        ],
        [
            "warm recall p50 over stdio at 100k",
            "28.9 ms",
            f"**{num(r100['recall_p50_ms'], 1)} ms** (p90 {num(r100['recall_p90_ms'], 1)} ms);"
            f" LanceDB's flat search alone {num(r100['lancedb_flat_p50_ms'])} ms"
            f" ({num(r100['lancedb_flat_over_ours'], 1)}x ours)",
            "",
        ],
        [
            f"recall while {stress['writers']} windows write {stress['per_writer']} insights each"
            f" ({stress['readers']} readers in a loop)",
            f"p50/p90 73/299 ms (issue); {num(solo['recall_ms_p50'])}/{num(solo['recall_ms_p90'])}"
            " ms `--in-process` in the same run",
            f"**p50/p90 {num(stress['recall_ms_p50'])}/{num(stress['recall_ms_p90'])} ms**,"
            f" {num(stress['recalls_during_storm'])} recalls vs"
            f" {num(solo['recalls_during_storm'])}",
            "p90 <= 50 ms",
        ],
        [
            "insights lost / with errors in that storm",
            "0 / 0",
            f"**{storm_lost(stress)} / {len(stress['errors'])}** ({stress['stored']} stored,"
            f" {stress['insights_after']} rows)",
            "0 / 0",
        ],
        [
            "near-duplicate pairs recorded at once from two windows",
            "both stored",
            "**one row each** (`tests/frontdoors/test_service.py`)",
            "one row",
        ],
        [
            f"`mtl-mcp import` of {num(imp['insights'])} insights: peak RSS",
            "2 GB",
            f"**{num(imp['peak_rss_mb'])} MB** ({num(imp['cli_per_s'])} per s;"
            f" {num(imp['stored'])} stored, {num(imp['merged'])} merged)",
            "<= 600 MB",
        ],
        [
            "`hook session-end` / `session-start` return",
            "342 / 499 ms",
            f"**{num(bench['hooks']['session-end_median_ms'])} /"
            f" {num(bench['hooks']['session-start_median_ms'])} ms** in the benchmark run, where"
            " each overlaps the previous run's background refresh (425 / 506 ms alternating with"
            " 0.1 on the same machine, each refresh finished first)",
            "under 1 s / 0.5 s",
        ],
    ]
    return table(["what", "0.1", "0.2 measured", "target"], rows)


def peers() -> str:
    run = result("peers")
    mtl, peer, ratio = run["mtl"], run["peer"], run["ratios_mtl_over_peer"]
    rows = [
        [
            "handshake (spawn -> tools listed), median; mtl-mcp: a new window, service warm",
            f"{num(run['handshake_ms']['mtl'], 1)} ms",
            f"{num(run['handshake_ms']['peer'])} ms",
            num(ratio["handshake"], 2),
        ],
        [
            "writes, one memory per call",
            f"{num(mtl['writes_per_s'])} /s",
            f"{num(peer['writes_per_s'])} /s",
            num(ratio["writes_per_s"], 2),
        ],
        [
            "search p50",
            f"{num(mtl['search_p50_ms'], 1)} ms",
            f"{num(peer['search_p50_ms'], 1)} ms",
            num(ratio["search_p50"]),
        ],
    ]
    head = [
        f"over MCP stdio, {mtl['memories']} memories",
        "mtl-mcp",
        "server-memory",
        "mtl-mcp / peer",
    ]
    return table(head, rows)


# Reliability (docs/security.md) ---------------------------------------------------------


def stress_column(run: dict[str, Any]) -> list[str]:
    new_rows = run["insights_after"] - run["insights_before"]
    duplicates = "no duplicate id" if not run["problems"] else "; ".join(run["problems"])
    return [
        f"{run['stored']} `stored`, {run['merged']} merged, {run['rejected']} rejected,"
        f" {len(run['errors'])} errors",
        f"{run['insights_after']} rows ({run['insights_before']} starter + {new_rows}),"
        f" {storm_lost(run)} lost, {duplicates}",
        f"{num(run['recalls_during_storm'])}: p50 {num(run['recall_ms_p50'])} ms,"
        f" p90 {num(run['recall_ms_p90'])} ms, p99 {num(run['recall_ms_p99'])} ms",
        f"p50 {run['write_ms_p50'] / 1000:.2f} s, p90 {run['write_ms_p90'] / 1000:.2f} s;"
        f" {run['writes_per_second']} writes/s",
        f"{run['compactions']} runs ({run['compactions_deferred_by_conflict']} yielded to a"
        f" concurrent commit), {run['compactions_failed']} failures,"
        f" {run['server_tracebacks']} tracebacks",
    ]


def stress() -> str:
    service, solo = result("stress"), result("stress-in-process")
    labels = [
        "calls answered",
        "table afterwards",
        "recalls during the storm (client side, over stdio)",
        "record_session during the storm",
        "compaction during the storm",
    ]
    columns = zip(labels, stress_column(service), stress_column(solo), strict=True)
    head = [
        f"stress run ({service['writers']} writers x {service['per_writer']},"
        f" {service['readers']} readers)",
        "shared service (default)",
        "`--in-process` (0.1's layout)",
    ]
    return table(head, [list(row) for row in columns])


def fuzz() -> str:
    run = result("fuzz")
    return f"{num(run['examples'])} examples in {num(run['seconds'])} s, {run['crashes']} crashes"


# Retrieval (docs/retrieval.md) ----------------------------------------------------------

METHODS = [
    ("paper, as published", "cosine to the plan, the insight's title as the key"),
    ("`dense` (baseline)", "cosine to the plan, title + description + content as the key"),
    ("`bm25`", "keywords only"),
    ("`hybrid`", "`dense` + BM25, reciprocal-rank fusion"),
    ("`split`", "cosine to the mean of the plan's sentence embeddings"),
    ("**`mtl` (default)**", "`split` + BM25, reciprocal-rank fusion"),
]
PAPER_METHOD = "embed the title only (the paper's key), dense"


def retrieval_methods() -> str:
    run = result("retrieval")
    scores = [run["experiments"][PAPER_METHOD]] + [
        run["methods"][m] for m in ("dense", "bm25", "hybrid", "split", "mtl")
    ]
    cells = [
        ("dev", "precision_at_k"),
        ("dev", "ndcg_at_10"),
        ("test", "precision_at_k"),
        ("test", "hit_at_k"),
        ("test", "mrr"),
        ("test", "recall_at_10"),
        ("test", "ndcg_at_10"),
    ]
    best = {cell: max(s[cell[0]][cell[1]] for s in scores) for cell in cells}
    rows = []
    for (name, ranking), score in zip(METHODS, scores, strict=True):
        row = [name, ranking]
        for split, metric in cells:
            value = num(score[split][metric], 3)
            row.append(
                f"**{value}**"
                if score is scores[-1] and score[split][metric] == best[(split, metric)]
                else value
            )
        rows.append(row)
    head = ["method", "ranking", "dev P@3", "dev nDCG@10", "test P@3", "test hit@3", "test MRR",
            "test R@10", "test nDCG@10"]  # fmt: skip
    return table(head, rows)


def feedback() -> str:
    final = result("feedback")["final"]["chosen"]

    def row(pool: str, noise: str, on: bool) -> list[str]:
        key = f"{'clean' if pool == 'shipped' else 'planted'}, noise {noise or '0.0'}"
        test = final[key]["test"]["on" if on else "off"]
        dev = final[key]["dev_in_sample"]["on" if on else "off"]
        planted = pool != "shipped"
        misleading = test["planted_on_targets"]
        if planted and on:
            base = final[key]["test"]["off"]["planted_on_targets"]
            mis = f"{num(misleading, 1).removesuffix('.0')} ({pct(misleading / base - 1)})"
        else:
            mis = num(misleading) if planted else ""
        return [
            pool,
            (pct(float(noise)) if float(noise) else "0") if on else "",
            "on" if on else "off",
            num(test["precision_at_k"], 3),
            num(test["hit_at_k"], 3),
            mis,
            pct(test["queries_with_planted"]) if planted else "",
            num(dev["precision_at_k"], 3)
            + (f", {num(dev['planted_on_targets'], 1).removesuffix('.0')}" if planted else ""),
        ]

    rows = [row("shipped", "0.0", False)]
    rows += [row("shipped", n, True) for n in ("0.0", "0.1", "0.2")]
    rows += [row("+ planted", "0.0", False)]
    rows += [row("+ planted", n, True) for n in ("0.0", "0.1", "0.2")]
    head = ["pool", "judge noise", "feedback", "test P@3", "test hit@3",
            "misleading in test top 3", "test queries with a planted lesson",
            "dev in sample: P@3, misleading"]  # fmt: skip
    return table(head, rows)


# Learning (docs/learning.md) ------------------------------------------------------------


def hooks() -> str:
    run = result("hooks")
    clean = result("feedback")["final"]["chosen"]
    before, after = (
        clean["planted, noise 0.0"]["test"][k]["planted_on_targets"] for k in ("off", "on")
    )
    cold = run["cold_ms"]
    rows = [
        [
            "a tool call where the hook has nothing to do, p50",
            f"{num(run['nothing_to_do_ms'])} ms (a bare `python -c pass`:"
            f" {num(run['bare_python_ms'])} ms)",
            "<= 50 ms",
        ],
        [
            "the hook's added time on the tool call that recalls, service warm, p50",
            f"{num(run['recall_warm_added_ms'])} ms",
            "<= 100 ms",
        ],
        [
            "the same with no service running",
            f"returns in {min(cold) / 1000:.1f}-{max(cold) / 1000:.1f} s and starts one; at most"
            " its 0.8 s budget plus the process start",
            "<= 1 s, never past its timeout",
        ],
        ["notes injected per task", "at most 2,400 characters (~600 tokens)", "<= ~600 tokens"],
        ["extra model calls for feedback", "0 (the verdicts ride the judge call)", "0"],
        [
            "the ledger in a recall (in-process, 200 alternated)",
            f"{num(run['recall_in_process_ms'], 1)} ms without,"
            f" {num(run['recall_in_process_recorded_ms'], 1)} ms with an origin",
            "not measurable",
        ],
        [
            "planted bad insights in the test top 3",
            f"{num(before)} -> {num(after)} ({pct(after / before - 1)})",
            "at least halved",
        ],
        [
            "the clean shipped set, test P@3",
            f"{num(clean['clean, noise 0.0']['test']['off']['precision_at_k'], 3)} ->"
            f" {num(clean['clean, noise 0.0']['test']['on']['precision_at_k'], 3)} with a perfect"
            f" judge; {num(clean['clean, noise 0.1']['test']['on']['precision_at_k'], 3)} with a"
            " 10% wrong one",
            "at most -0.01",
        ],
    ]
    return table(["what", "measured", "target"], rows)


def _gate_row(name: str, dev: dict[str, Any], test: dict[str, Any]) -> list[str]:
    return [
        name,
        num(dev["precision"], 2),
        pct(dev["plans_with_a_note"]),
        num(test["precision"], 2),
        pct(test["plans_with_a_note"]),
    ]


def relevance_gate() -> str:
    """The gate against 0.3's floor and the simple gates, dev and test (docs/retrieval.md)."""
    run = result("relevance_floor")
    chosen = run["chosen"]
    every = run["every_note"]
    rows = [
        _gate_row(
            f"**relevance gate, p >= {chosen['min_p']:.2f}, one note a plan** (dev: out-of-fold)",
            chosen["dev_out_of_fold"],
            chosen["test"],
        ),
        _gate_row(
            f"the same gate, every note with p >= {every['min_p']:.2f} (its own dev choice)",
            every["dev_out_of_fold"],
            every["test"],
        ),
    ]
    rows += [
        _gate_row(name, split["dev"], split["test"]) for name, split in run["simple_gates"].items()
    ]
    if hook := run.get("hook"):
        dev, test = hook["dev"], hook["test"]
        rows.append(
            _gate_row(
                f"relevance gate through `mtl-mcp hook tool-use`, the shipped fit"
                f" ({test['relevant_notes']} of {test['notes']} test notes relevant)",
                dev,
                test,
            )
        )
    head = ["gate (top 3)", "dev precision", "dev plans with a note", "test precision"]
    return table([*head, "test plans with a note"], rows)


def relevance_curve() -> str:
    """The gate's precision/coverage at each threshold (docs/retrieval.md)."""
    run = result("relevance_floor")
    dev, test = run["gate_curve"]["dev_out_of_fold"], run["gate_curve"]["test"]
    every = run["gate_curve_every_note"]["test"]

    def threshold(point: dict[str, Any]) -> str:
        shown = f"{point['min_p']:.2f}"
        return f"**{shown}**" if point["min_p"] == run["chosen"]["min_p"] else shown

    rows = [
        [
            threshold(a),
            num(a["precision"], 2),
            pct(a["plans_with_a_note"]),
            num(b["precision"], 2),
            pct(b["plans_with_a_note"]),
            f"{num(c['precision'], 2)} ({num(c['notes_per_plan'], 2)} a plan)",
        ]
        for a, b, c in zip(dev, test, every, strict=True)
        if 0.2 <= a["min_p"] <= 0.8
    ]
    head = ["p >=", "dev precision", "dev plans with a note", "test precision"]
    return table([*head, "test plans with a note", "test, every note that passes"], rows)


def relevance_floor_curve() -> str:
    """0.3's cosine floor at each floor, dev and test (docs/retrieval.md)."""
    run = result("relevance_floor")["floor_curve"]
    rows = [
        [
            num(a["floor"], 3),
            num(a["precision"], 2),
            pct(a["plans_with_a_note"]),
            num(b["precision"], 2),
            pct(b["plans_with_a_note"]),
        ]
        for a, b in zip(run["dev"], run["test"], strict=True)
        if round(a["floor"] * 1000) % 50 == 0  # every 0.05: 0.025 steps are too fine to read
    ]
    head = ["cosine >=", "dev precision", "dev plans with a note", "test precision"]
    return table([*head, "test plans with a note"], rows)


def relevance_search() -> str:
    """Each family of signals tried, chosen on dev, test once, and its ceiling."""
    run = result("gate_search")

    def point(found: dict[str, Any]) -> str:
        return f"{num(found['precision'], 2)} / {pct(found['plans_with_a_note'])}"

    rows = []
    for name, found in run["families"].items():
        best = found["ceiling_on_test"]["best_with_half_the_plans"][found["chosen_rule"]]
        rows.append(
            [
                name,
                num(found["dev_log_loss"], 3),
                f"{found['chosen_rule']}, p >= {found['min_p']:.2f}",
                point(found["dev"]),
                point(found["test"]),
                num(found["test_auc"], 2),
                num(best["precision"], 2) if best else "-",
            ]
        )
    head = ["signals", "dev log loss", "dev's choice", "dev precision / plans", "test"]
    return table([*head, "test AUC", "ceiling: fitted on test"], rows)


def relevance_signals() -> str:
    """Out-of-fold dev log loss of each signal set tried (docs/retrieval.md)."""
    rows = [
        [
            " + ".join(f"`{n}`" if n in ("similarity_z", "keyword") else n for n in row["signals"]),
            num(row["log_loss"], 3),
        ]
        for row in result("relevance_floor")["signal_sets"]
    ]
    return table(["signals", "dev log loss, out-of-fold"], rows)


def relevance_one_note() -> str:
    """What one note a plan does on dev, each rule at its own dev threshold."""
    run = result("relevance_floor")
    one, every = run["chosen"], run["every_note"]
    a, b = every["dev_out_of_fold"], one["dev_out_of_fold"]
    return (
        f"on dev (out-of-fold, each rule at the threshold dev chooses for it) every note that"
        f" passes is {num(a['precision'], 2)} precise with {pct(a['plans_with_a_note'])} of"
        f" plans getting one, the most probable note alone {num(b['precision'], 2)} with"
        f" {pct(b['plans_with_a_note'])}; on test {num(every['test']['precision'], 2)} and"
        f" {num(one['test']['precision'], 2)}"
    )


def relevance_ceiling() -> str:
    """The best any fit on the test split itself finds (docs/retrieval.md)."""
    families = result("gate_search")["families"]

    def best(name: str) -> str:
        found = families[name]["ceiling_on_test"]["best_with_half_the_plans"]["one note a plan"]
        return f"{num(found['precision'], 2)} ({found['notes']} notes)"

    shipped, everything = families["the shipped signals"], families["everything"]
    return (
        "Fitted on the test split itself (in-sample, the most generous penalty and threshold"
        f" for it), the shipped two signals show at best {best('the shipped signals')} precise"
        f" notes with half of the plans getting one; all {len(everything['signals'])} signals"
        f" together {best('everything')}, with a test AUC of"
        f" {num(everything['ceiling_on_test']['auc'], 2)} against"
        f" {num(shipped['ceiling_on_test']['auc'], 2)}"
    )


def relevance_plans() -> str:
    plans = result("gate_search")["test_plans"]
    half = plans["plans"] // 2
    return (
        f"Of the {plans['plans']} test plans, {plans['with_a_relevant_top_3_note']} have a"
        f" relevant note in their top 3 and {plans['rank_1_relevant']} a relevant first one:"
        f" to give {half} plans one note at 0.75 precision, the gate must pick a relevant"
        f" note for {math.ceil(0.75 * half)} of them, with signals whose AUC on test is ~0.7"
    )


def relevance_separability() -> str:
    found = result("relevance_floor")["separability_all_queries_out_of_fold"]
    return f"AUC {num(found['test_auc'], 2)} (dev: {num(found['dev_auc'], 2)})"


def relevance_chosen() -> str:
    """One sentence on the chosen point (docs/learning.md)."""
    run = result("relevance_floor")
    chosen, floor = run["chosen"], run["simple_gates"]["cosine >= 0.40 (0.3's floor)"]
    test, dev = chosen["test"], chosen["dev_out_of_fold"]
    return (
        f"at p >= {chosen['min_p']:.2f}, chosen on the dev split ({num(dev['precision'], 2)}"
        f" precision out-of-fold, {pct(dev['plans_with_a_note'])} of plans getting a note), the"
        f" test split's notes are {num(test['precision'], 2)} precise and"
        f" {pct(test['plans_with_a_note'])} of its plans get one; 0.3's cosine floor gave"
        f" {num(floor['test']['precision'], 2)} and {pct(floor['test']['plans_with_a_note'])}"
    )


LOCAL_MODES = [
    ("JSON, honouring the schema", ["schema"]),
    ("JSON in a code fence, with prose around it", ["fenced"]),
    (
        "almost JSON: trailing or missing commas, single quotes, a missing last brace, Python"
        " literals, unquoted keys, comments, prose after it, a one-key wrapper",
        [
            "almost:trailing-commas",
            "almost:missing-commas",
            "almost:single-quotes",
            "almost:truncated-brace",
            "almost:python-literals",
            "almost:unquoted-keys",
            "almost:comments",
            "almost:prose-after",
            "almost:wrong-keys",
        ],
    ),
    (
        "almost JSON cut off inside a string (the last field lost; rejected: a required field"
        " is gone)",
        ["almost:truncated-string"],
    ),
    ("not JSON, then valid JSON after the repair turn", ["invalid-then-valid"]),
    ("prose, never JSON (the job backs off)", ["garbage"]),
]


def local_model() -> str:
    modes = {mode["mode"]: mode for mode in result("local_model")["modes"]}
    rows = []
    for label, names in LOCAL_MODES:
        usable = min(modes[name]["usable_rate"] for name in names)
        at_once = min(modes[name]["usable_at_once_rate"] for name in names)
        rows.append([label, pct(usable), pct(at_once)])
    return table(["the fake model answers", "answers usable", "without a second request"], rows)


# Team pool (docs/team.md) ---------------------------------------------------------------


def team() -> str:
    run, remote = result("team"), result("remote_pool")
    small, big = run["snapshot_load"]["10000"], run["snapshot_load"]["100000"]
    tiers, outage = run["recall_10k_plus_10k"], run["outage"]
    batch, single = run["writes"]
    steady, stalled = (remote["mcp_stdio_through_service"][k] for k in ("steady", "stalled"))
    wall = outage["cli_recall_wall"]
    rows = [
        [
            "snapshot load, 10,000-insight pool",
            f"**{num(small['load_p50_ms'])} ms** (+{num(small['keyword_index_p50_ms'])} ms"
            " keyword index)",
            "",
            "a fresh process's first load (rows and vectors over S3), median of 3",
        ],
        [
            "snapshot load, 100,000-insight pool",
            f"**{big['load_p50_ms'] / 1000:.2f} s** (+{num(big['keyword_index_p50_ms'])} ms"
            " keyword index)",
            "",
            "the same; both run in the background after the first one",
        ],
        [
            "recall p50, personal store alone (10,000)",
            f"{num(tiers['personal_alone_p50_ms'], 1)} ms",
            "",
            "in process, 3-sentence plans, 200 calls",
        ],
        [
            "recall p50, personal 10,000 + team 10,000",
            f"{num(tiers['both_tiers_p50_ms'], 1)} ms: **{num(tiers['ratio'], 2)}x**",
            "within 1.2x",
            "alternating with the line above",
        ],
        [
            "recall with the pool down, snapshot loaded",
            f"{num(outage['loaded_snapshot_store_down_p50_ms'], 1)} ms"
            f" ({num(outage['loaded_snapshot_healthy_p50_ms'], 1)} ms before it went down)",
            "no added cost",
            "a server's case: refreshes fail in the background; the previous run had it the"
            " other way round (25.0 vs 34.2 ms): noise",
        ],
        [
            "first recall of a new process, pool down",
            f"**{outage['fresh_process_first_recall_refused_p50_ms'] / 1000:.2f} s** refused,"
            f" **{outage['fresh_process_first_recall_silent_p50_ms'] / 1000:.2f} s** silent",
            "a small fixed delay",
            f"the {num(outage['first_load_wait_s'])} s first-load bound; `mtl-mcp recall` wall"
            f" time: {wall['pool_silent']['extra_s']:+.2f} s over no pool (with the pool up:"
            f" {wall['pool_up']['extra_s']:+.2f} s)",
        ],
        [
            "writes, 4 machines x 50 insights at once",
            f"**{num(batch['insights_per_s'])} insights/s** sharing"
            f" {batch['insights_per_share_call']} per call ({num(batch['wall_s'], 1)} s);"
            f" {num(single['insights_per_s'], 1)}/s one per call ({num(single['wall_s'])} s)",
            "",
            f"{batch['rows']} of {batch['statuses']['shared']} rows,"
            f" {batch['duplicate_ids'] + single['duplicate_ids']} duplicate ids",
        ],
        [
            "recall p50 over MCP stdio, pool 20 ms away (personal"
            f" {num(remote['setup']['personal_insights'])} + team"
            f" {num(remote['setup']['pool_insights'])})",
            f"{num(steady['two_tier']['p50_ms'], 1)} ms vs"
            f" {num(steady['personal_alone']['p50_ms'], 1)} ms alone:"
            f" **{num(steady['ratio_p50'], 2)}x** (p90 {num(steady['two_tier']['p90_ms'], 1)} vs"
            f" {num(steady['personal_alone']['p90_ms'], 1)} ms); 1.11x before the fix below"
            " (41.0 vs 37.1 ms)",
            "within 1.2x",
            "`bench/remote_pool.py`: through the relay and the service, alternating,"
            f" {steady['personal_alone']['n']} calls each",
        ],
        [
            "the same with the pool's server stalled, a pool nobody shared to yet",
            f"**{num(stalled['empty']['p50_ms'], 1)} ms** (2,036 ms before)",
            "no added cost",
            f"{num(stalled['seconds'])} s of stall, longer than a refresh interval; a loaded"
            f" pool: {num(stalled['both']['p50_ms'], 1)} ms (35.3 before)",
        ],
        [
            "bytes stored per insight",
            f"**{num(batch['bytes_per_insight_compacted'])}** once compacted (real ~50-word"
            f" lessons); {num(small['bytes_per_insight'])} for the synthetic pools;"
            f" {batch['bytes_per_insight'] / 1000:.1f} KB ({batch['insights_per_share_call']} per"
            f" call) and {num(single['bytes_per_insight'] / 1000)} KB (one per call) right after"
            " the burst",
            "",
            "every object under the pool's prefix over its rows; the 1,536-byte vector dominates",
        ],
    ]
    return table(["what", "measured", "target", "how"], rows)


# Reference (docs/reference.md) ----------------------------------------------------------


def tool_output() -> str:
    run = result("tool_output")
    shapes = [
        ("before: every field as JSON, no framing", "full JSON"),
        ("text only (no structured content: no ids or scores for programs)", "text only"),
        ('**now**: `{"notes": ..., "results": [{"id", "score", "p"}]}`', "notes + ids"),
    ]
    rows = []
    for label, key in shapes:
        cells = [
            f"{num(run[t][key]['chars'])} chars, ~{num(run[t][key]['tokens'])} tokens"
            for t in ("recall", "list")
        ]
        rows.append([label, *(f"**{c}**" if key == "notes + ids" else c for c in cells)])
    return table(
        ["what the model reads", "`recall_insights`, k = 3", "`list_memories`, 20 insights"], rows
    )


def dashboard() -> str:
    sizes = result("dashboard")["sizes"]
    small = sizes["10000"]

    def server_times(size: str) -> str:
        queries = sizes[size]["queries"]
        times = [q["server_ms"] for q in queries.values()]
        parts = ", ".join(
            f"{name} {num(q['server_ms'], 1)}"
            for name, q in queries.items()
            if name != "first page"
        )
        return f"**{num(min(times), 1)}-{num(max(times), 1)} ms** ({parts})"

    usable = small["first_page_usable"]
    preview = small["plan_preview"]
    memory = small["memory"]
    rows = [
        [
            "first page usable, 10k insights (Chromium, from navigation)",
            "<= 300 ms",
            f"**{num(usable['median_ms'])} ms** median (max {num(usable['max_ms'])} ms)",
        ],
        ["search and filter, 10k: server time", "<= 50 ms", server_times("10000")],
        ["search and filter, 100k: server time", "<= 200 ms", server_times("100000")],
        [
            "plan preview, 10k",
            "recall + <= 20 ms",
            f"recall {num(preview['recall_ms'], 1)} ms, preview {num(preview['preview_ms'], 1)} ms:"
            f" **+{num(preview['preview_minus_recall_ms'], 1)} ms**",
        ],
        [
            "extra memory of the service with the dashboard open, 10k",
            "<= 30 MB",
            f"**+{num(memory['extra_mb'], 1)} MB** ({num(memory['service_rss_mb_before'], 1)} ->"
            f" {num(memory['service_rss_mb_with_dashboard_open'], 1)} MB); the same dashboard"
            f" beside the service: a {num(memory['beside_process_rss_mb'])} MB process of its own",
        ],
    ]
    return table(["what", "target", "measured"], rows)


# Trials (docs/trials.md) -----------------------------------------------------------------


def trial_overhead() -> str:
    run = result("trial_overhead")
    rows = [
        [
            f"the harness's own time per session, the agent left out (median of "
            f"{run['sessions']} sessions of the built-in suite, arms none and memory)",
            f"<= {num(run['target_s'])} s",
            f"**{num(run['median_overhead_s'], 2)} s**, of which the task's verifier "
            f"{num(run['median_verifier_s'], 2)} s (the rest: "
            f"{num(run['median_overhead_without_verifier_s'], 2)} s)",
        ],
        [
            "once a trial: copy the memory, start its service and load its model",
            "—",
            f"{num(run['fixed_prepare_arms_s'], 1)} s + {num(run['fixed_start_services_s'], 1)} s",
        ],
    ]
    return table(["what", "target", "measured"], rows) + (
        f"\n\n(load average {num(run['load_average_at_start'], 1)} at the start: a shared machine)"
    )


# Issue 27's speed targets (benchmarks, retrieval) ------------------------------------------


def verdict(ok: bool) -> str:
    return "met" if ok else "**not met**"


def speed() -> str:
    run = result("speed")
    emb, stdio, load, cold = run["embedding"], run["stdio"], run["load"], run["cold"]
    memory, writes = run["memory"], run["writes"]
    plan = emb["after_over_before"]["plan_p50_ms"]
    quality = emb["quality"]
    drift = max(
        abs(quality["after"][key] - quality["before"][key]) for key in ("p_at_3", "hit_at_3")
    )
    after_stdio = stdio["after"]["stdio_over_in_process"]
    before_stdio = stdio["before"]["stdio_over_in_process"]
    busy = load["after"]["busy_over_idle"]
    first = cold["after"]["first_over_bare_plus_warm"]
    killed = cold["after_kill_over_cold_first_before"]
    total = memory["after"]["total_4_windows_10k_mb"]
    big = memory["after"]["service_100k_mb"]
    imports, calls = writes["import_after_over_before"], writes["writes_after_over_before"]
    peak = writes["after"]["import_peak_rss_mb"]
    rows = [
        [
            "1. plan embedding, after / before (wall p50; CPU)",
            "<= 0.5x, P@3 and hit@3 within 0.01",
            f"**{num(plan, 2)}x**; CPU {num(emb['after_over_before']['plan_cpu_p50_ms'], 2)}x;"
            f" P@3 / hit@3 moved {num(drift, 3)}",
            verdict(plan <= 0.5 and drift <= 0.01),
        ],
        [
            "2. recall at 10k over stdio / in process",
            "<= 1.15x",
            f"**{num(after_stdio, 2)}x** (before {num(before_stdio, 2)}x)",
            verdict(after_stdio <= 1.15),
        ],
        [
            "3. recall p50 with two CPU-bound neighbours / without",
            "<= 2x",
            f"**{num(busy, 2)}x** (before {num(load['before']['busy_over_idle'], 2)}x); busy"
            f" recall after / before {num(load['busy_p50_after_over_before'], 2)}x",
            verdict(busy <= 2)
            if load.get("load_average_at_start", IDLE_LOAD) < IDLE_LOAD
            and load.get("load_average_at_end", IDLE_LOAD) < IDLE_LOAD + NEIGHBOURS
            else "not shown: the phase without neighbours was not idle (below)",
        ],
        [
            "4a. first recall of a new window, no service / (bare handshake + warm recall)",
            "<= 1.3x",
            f"**{num(first, 2)}x** (before {num(cold['before']['first_over_bare_plus_warm'], 2)}x)",
            verdict(first <= 1.3),
        ],
        [
            "4b. first recall after kill -9 of the service / the cold first recall before",
            "<= 0.5x",
            f"**{num(killed, 2)}x**",
            verdict(killed <= 0.5),
        ],
        [
            "5. RSS of 4 windows and the service at 10k; the service at 100k",
            "<= 420 MB; <= 600 MB",
            f"**{num(total)} MB** ({spread(memory['after'], 'total_4_windows_10k_rounds_mb')}"
            f"before {num(memory['before']['total_4_windows_10k_mb'])});"
            f" **{num(big)} MB** ({spread(memory['after'], 'service_100k_rounds_mb')}"
            f"before {num(memory['before']['service_100k_mb'])})",
            verdict(total <= 420 and big <= 600),
        ],
        [
            f"6. `mtl-mcp import` of {num(sum(writes['after']['imported'].values()))} insights;"
            " one record_session per call",
            ">= 5x, peak <= 600 MB; >= 3x",
            f"**{num(imports, 2)}x** ({num(writes['before']['import_per_s'])} ->"
            f" {num(writes['after']['import_per_s'])} /s), peak {num(peak)} MB;"
            f" **{num(calls, 2)}x** ({num(writes['before']['writes_per_s'], 1)} ->"
            f" {num(writes['after']['writes_per_s'], 1)} /s)",
            verdict(imports >= 5 and peak <= 600 and calls >= 3),
        ],
    ]
    return table(
        [
            "issue 27 target",
            "asked",
            "measured, before and after in one run per section",
            "verdict",
        ],
        rows,
    )


def speed_embedding() -> str:
    emb = result("speed")["embedding"]
    runtimes, quality = emb["runtimes"], emb["quality"]
    rows = [
        [
            label,
            f"{num(runtimes[key]['plan_p50_ms'], 1)} ms",
            f"{num(runtimes[key]['plan_cpu_p50_ms'], 1)} ms",
            " / ".join(num(quality[key][m], 3) for m in ("p_at_3", "hit_at_3", "mrr")),
        ]
        for key, label in (
            ("before", "8-bit MatMulNBits rewrite (`all-MiniLM-L6-v2-int8`)"),
            ("after", "integer GEMMs (`all-MiniLM-L6-v2-int8-r2`)"),
        )
    ]
    ratio = emb["after_over_before"]
    rows.append(
        [
            "after / before",
            f"**{num(ratio['plan_p50_ms'], 2)}x** (p10 {num(ratio['plan_p10_ms'], 2)}x)",
            f"{num(ratio['plan_cpu_p50_ms'], 2)}x",
            f"cosine between the two >= {num(emb['vectors']['cosine_min'], 5)} over"
            f" {emb['vectors']['texts']} texts; same top 3 for {emb['same_top3']} of"
            f" {emb['queries']} plans",
        ]
    )
    return table(["runtime", "3-sentence plan, wall p50", "CPU p50", "P@3 / hit@3 / MRR"], rows)


# A year of sessions (docs/memory-health.md) -----------------------------------------------

WITHOUT, WITH = "baseline", "consolidated"
YEAR_PARTS = {  # `bench/year.py --only PART`: the key of year.json it writes
    "setup": ("stream",),
    "baseline": ("runs", WITHOUT),
    "consolidated": ("runs", WITH),
    "never-retiring": ("runs", "consolidated, never retiring unused"),
    "confirmations": ("confirmations",),
    "ten_thousand": ("ten_thousand",),
}


def year_missing(*parts: str) -> list[str]:
    """The parts of the year bench that year.json does not hold yet."""
    try:
        year = result("year")
    except FileNotFoundError:
        return list(parts)
    return [p for p in parts if not _has(year, YEAR_PARTS[p])]


def _has(tree: Any, keys: tuple[str, ...]) -> bool:
    return not keys or (keys[0] in tree and _has(tree[keys[0]], keys[1:]))


def not_measured(parts: list[str]) -> str:
    runs = ", ".join(f"`python bench/year.py --only {p}`" for p in parts)
    return f"*Not measured yet: {runs}, then `python bench/figures.py`.*"


def year_figure(*parts: str) -> Callable[[Callable[[], str]], Callable[[], str]]:
    """A year figure, or a line naming the parts of the bench it still needs."""

    def wrap(figure: Callable[[], str]) -> Callable[[], str]:
        def written() -> str:
            missing = year_missing(*parts)
            return not_measured(missing) if missing else figure()

        return written

    return wrap


def _pair(runs: dict[str, Any], point: int, name: str, show: Callable[[Any], str]) -> str:
    without, with_ = (runs[r]["curve"][point][name] for r in (WITHOUT, WITH))
    return f"{show(without)} / **{show(with_)}**"


@year_figure("baseline", "consolidated")
def year_curves() -> str:
    runs = result("year")["runs"]
    rows = []
    for point, base in enumerate(runs[WITHOUT]["curve"]):
        rows.append(
            [
                num(base["insights"]),
                str(base["day"]),
                _pair(runs, point, "p_at_3", lambda v: num(v, 3)),
                _pair(runs, point, "p_at_3_judged", lambda v: num(v, 3)),
                _pair(runs, point, "hit_at_3", lambda v: num(v, 3)),
                _pair(runs, point, "dupe_share", pct),
                _pair(runs, point, "active", num),
                num(base["distinct_lessons"]),
                _pair(runs, point, "recall_p50_ms", lambda v: num(v, 1)),
            ]
        )
    head = [
        "insights",
        "day",
        "P@3 (without / **with**)",
        "P@3, judged lessons only",
        "hit@3",
        "top-3 answers with two wordings of a lesson",
        "active insights",
        "distinct lessons",
        "recall p50, ms",
    ]
    return table(head, rows)


def _yes(ok: bool) -> str:
    return "yes" if ok else "**no**"


@year_figure("setup")
def year_targets() -> str:
    year = result("year")
    lived = year_missing("baseline", "consolidated")
    rows = [] if lived else lived_rows(year)
    load = year["machine"]["load_average_1min"]
    note = (
        f"\n\nMeasured on a shared machine of {year['machine']['cores']} cores, its 1-minute load"
        f" average {num(load['min'], 1)}-{num(load['max'], 1)} (median {num(load['median'], 1)})"
        " while the bench ran"
    )
    if year_missing("ten_thousand"):
        note += ". The pass over 10,000 insights: " + not_measured(["ten_thousand"])
    else:
        rows += ten_thousand_rows(year["ten_thousand"])
        note += "; during the rounds of the 10,000-insight pass: " + ", ".join(
            num(r["load_average_1min"], 1) for r in year["ten_thousand"]["rounds"]
        )
        note += "."
    if lived:
        note += " The targets after the lived year: " + not_measured(lived)
    if not rows:
        return note.lstrip()
    return table(["target", "without consolidation", "with", "met"], rows) + note


def lived_rows(year: dict[str, Any]) -> list[list[str]]:
    clean, clean_year = year["clean_pool"], year["clean_year"]
    runs = {name: year["runs"][name] for name in (WITHOUT, WITH)}
    end = {name: run["curve"][-1] for name, run in runs.items()}
    final = runs[WITH]["final"]
    misled = final["misleading"]
    ok_misled = sum(m["ok"] for m in misled.values())
    replayed = final["session_plans_replayed"]
    floor = clean["p_at_3"] - 0.02
    lost = final["right_lessons_without_an_active_row"]
    return [
        [
            f"P@3 on the evaluation plans >= the clean pool's - 0.02 ({num(clean['p_at_3'], 3)}"
            f" - 0.02); a perfectly kept memory of the year: {num(clean_year['p_at_3'], 3)}",
            f"{num(end[WITHOUT]['p_at_3'], 3)}",
            f"**{num(end[WITH]['p_at_3'], 3)}**",
            _yes(end[WITH]["p_at_3"] >= floor),
        ],
        [
            "the same on judged lessons only (the year's right lessons outside the pool, which"
            " its labels do not judge, left out); a perfectly kept year: "
            f"{num(clean_year['p_at_3_judged'], 3)}",
            f"{num(end[WITHOUT]['p_at_3_judged'], 3)}",
            f"**{num(end[WITH]['p_at_3_judged'], 3)}**",
            _yes(end[WITH]["p_at_3_judged"] >= floor),
        ],
        [
            "no top-3 answer holding two wordings of one lesson (evaluation plans; "
            f"{num(replayed)} of the year's session plans)",
            f"{pct(end[WITHOUT]['dupe_share'])}; "
            f"{num(runs[WITHOUT]['final']['session_plan_answers_with_two_wordings'])}",
            f"**{pct(end[WITH]['dupe_share'])}; "
            f"{num(final['session_plan_answers_with_two_wordings'])}**",
            _yes(
                end[WITH]["dupe_share"] == 0 and not final["session_plan_answers_with_two_wordings"]
            ),
        ],
        [
            "active insights <= 1.2x the distinct lessons",
            f"{num(end[WITHOUT]['active_per_lesson'], 2)}x",
            f"**{num(end[WITH]['active_per_lesson'], 2)}x**",
            _yes(end[WITH]["active_per_lesson"] <= 1.2),
        ],
        [
            "every planted misleading lesson retired by verdicts, or never in a top 3",
            f"{sum(m['ok'] for m in runs[WITHOUT]['final']['misleading'].values())} of "
            f"{len(misled)}",
            f"**{ok_misled} of {len(misled)}**",
            _yes(ok_misled == len(misled)),
        ],
        [
            "right lessons left with no active insight (of them: project facts)",
            f"{num(sum(runs[WITHOUT]['final']['right_lessons_without_an_active_row'].values()))}",
            f"**{num(sum(lost.values()))}** ({num(lost.get('fact', 0))}) of"
            f" {num(final['right_lessons'])}",
            "",
        ],
        [
            "every contradiction pair flagged (false flags)",
            "nothing flags",
            f"**{final['contradictions_flagged']} of {final['contradictions_planted']}** "
            f"({len(final['false_flags'])})",
            _yes(final["contradictions_flagged"] == final["contradictions_planted"]),
        ],
        [
            "superseded lessons found",
            "",
            f"**{final['superseded_found']} of {final['superseded_planted']}**",
            _yes(final["superseded_found"] == final["superseded_planted"]),
        ],
        [
            "wordings merged into another lesson's insight",
            "",
            f"**{final['merged_into_another_lesson']} of {num(final['merged_members'])}**",
            _yes(final["merged_into_another_lesson"] == 0),
        ],
    ]


def ten_thousand_rows(big: dict[str, Any]) -> list[list[str]]:
    return [
        [
            f"a pass over {num(big['insights'])} insights under 60 s on 2 cores (the slowest of"
            f" {len(big['rounds'])})",
            "",
            f"**{num(big['pass_seconds'], 1)} s** ("
            + ", ".join(f"{num(r['pass_seconds'], 1)}" for r in big["rounds"])
            + ")",
            _yes(big["pass_seconds"] < 60),
        ],
        [
            "recall while it runs: p50 within 1.2x of just before (the median round)",
            "",
            f"**{num(big['ratio'], 2)}x** ({num(big['recall_p50_ms_idle'], 1)} -> "
            f"{num(big['recall_p50_ms_during_pass'], 1)} ms; rounds: "
            + ", ".join(f"{num(r['ratio'], 2)}x" for r in big["rounds"])
            + ")",
            _yes(big["ratio"] <= 1.2),
        ],
    ]


@year_figure("setup")
def year_stream() -> str:
    year = result("year")
    stream, sim = year["stream"], year["similarity"]
    kinds = ", ".join(f"{k} {num(v)}" for k, v in sorted(stream["by_kind"].items()))
    bins = " · ".join(f"{k}: {pct(v)}" for k, v in sim["bins"].items())
    return "\n".join(
        [
            f"- {num(stream['insights'])} insights in {num(stream['sessions'])} sessions over "
            f"{stream['days']} days, {num(stream['lessons'])} lessons: {kinds}.",
            f"- Cosine of each of the {num(sim['paraphrases'])} paraphrases to its lesson's "
            f"first wording (median {num(sim['median'], 3)}): {bins}. "
            f"**{pct(sim['between_0.80_and_0.92'])} between 0.80 and 0.92**, where write-time "
            f"dedup misses them; {pct(sim['merged_at_write_time_share'])} at 0.92 or more, "
            "which it merges.",
        ]
    )


@year_figure("setup")
def year_references() -> str:
    year = result("year")
    clean, kept = year["clean_pool"], year["clean_year"]
    return (
        f"the clean pool's P@3 is {num(clean['p_at_3'], 3)} (the floor: "
        f"{num(clean['p_at_3'] - 0.02, 3)}), a perfectly kept year's {num(kept['p_at_3'], 3)}"
        f" ({num(kept['p_at_3_judged'], 3)} on judged lessons only), over"
        f" {num(year['queries'])} evaluation plans"
    )


@year_figure("setup")
def year_thresholds() -> str:
    rows = [
        [
            num(t["merge_at"], 2),
            num(t["attach_at"], 2),
            num(t["compare_from"], 2),
            num(t["wordings_in_another_lessons_cluster"]),
            num(t["wordings_left_outside"]),
            f"{t['planted_pairs_flagged']} of {t['planted_pairs']}",
            num(t["false_flags"]),
        ]
        for t in result("year")["similarity"]["thresholds"]
    ]
    head = ["clusters join at", "a wording joins at", "pairs compared from",
            "wordings in another lesson's cluster", "wordings left outside their lesson's",
            "planted pairs caught", "false flags"]  # fmt: skip
    return table(head, rows)


@year_figure("never-retiring")
def year_retire() -> str:
    sweep = result("year")["runs"]["consolidated, never retiring unused"]["final"]["retire_sweep"]
    kinds = sorted({k for figures in sweep.values() for k in figures["retired_at_end"]})
    rows = [
        [
            f"{days} days",
            *[num(figures["retired_at_end"].get(k, 0)) for k in kinds],
            num(figures["needed_while_retired"]),
        ]
        for days, figures in sweep.items()
    ]
    head = [
        "retire after",
        *[f"{k} retired at the end" for k in kinds],
        "sessions that needed a retired lesson",
    ]
    return table(head, rows)


@year_figure("confirmations", "baseline")
def year_confirms() -> str:
    confirms = result("year")["confirmations"]
    base = result("year")["runs"][WITHOUT]["curve"][-1]["active"]
    rows = [
        [
            digest,
            pct(figures["confirmed_share"]),
            num(figures["by_outcome"].get("merged", 0)),
            num(figures["by_outcome"].get("stored", 0)),
            num(figures["active_at_end"]),
        ]
        for digest, figures in confirms.items()
    ]
    rows.append(["(no confirmations: write-time dedup only)", "0%", "", "", num(base)])
    head = ["the distiller is shown the insights nearest to", "confirmed instead of written",
            "merged at write time", "stored", "active at the end"]  # fmt: skip
    return table(head, rows)


FIGURES: dict[str, Callable[[], str]] = {
    "headline": headline,
    "benchmarks": benchmarks,
    "peers": peers,
    "stress": stress,
    "fuzz": fuzz,
    "retrieval-methods": retrieval_methods,
    "feedback": feedback,
    "hooks": hooks,
    "relevance-gate": relevance_gate,
    "relevance-curve": relevance_curve,
    "relevance-floor-curve": relevance_floor_curve,
    "relevance-search": relevance_search,
    "relevance-chosen": relevance_chosen,
    "relevance-signals": relevance_signals,
    "relevance-separability": relevance_separability,
    "relevance-one-note": relevance_one_note,
    "relevance-ceiling": relevance_ceiling,
    "relevance-plans": relevance_plans,
    "local-model": local_model,
    "tool-output": tool_output,
    "team": team,
    "dashboard": dashboard,
    "trial-overhead": trial_overhead,
    "speed": speed,
    "speed-embedding": speed_embedding,
    "year-stream": year_stream,
    "year-curves": year_curves,
    "year-targets": year_targets,
    "year-retire": year_retire,
    "year-thresholds": year_thresholds,
    "year-references": year_references,
    "year-confirms": year_confirms,
}


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def render(text: str, where: Path) -> str:
    """The text with each figure rewritten: a block figure on lines of its own, else inline."""

    def figure(match: re.Match[str]) -> str:
        name, body = match["name"], match["body"]
        if name not in FIGURES:
            known = ", ".join(FIGURES)
            raise SystemExit(f"{where.relative_to(ROOT)}: no figure {name!r} (known: {known})")
        new = FIGURES[name]()
        inner = f"\n{new}\n" if body.startswith("\n") else new
        return f"<!-- figures:{name} -->{inner}<!-- /figures -->"

    return MARKER.sub(figure, text)


IDLE_LOAD = 1.0  # a 1-minute load average under which a 2-core machine counts as idle
NEIGHBOURS = 2  # the load section's own CPU-bound neighbours, in its load average at the end


def spread(entry: dict[str, Any], key: str) -> str:
    """ "median of N rounds, LOW-HIGH; " where `entry` holds its rounds, else nothing."""
    rounds = entry.get(key)
    if not rounds:
        return ""
    return f"median of {len(rounds)} rounds, {num(min(rounds))}-{num(max(rounds))}; "


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="Fail on a stale figure; write nothing."
    )
    args = parser.parse_args()
    stale = []
    for path in documents():
        text = path.read_text(encoding="utf-8")
        new = render(text, path)
        if new == text:
            continue
        names = [
            m["name"]
            for m, n in zip(MARKER.finditer(text), MARKER.finditer(new), strict=True)
            if m[0] != n[0]
        ]
        if args.check:
            stale += [f"{path.relative_to(ROOT)}: figure {name!r}" for name in names]
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {path.relative_to(ROOT)}: {', '.join(names)}", file=sys.stderr)
    if stale:
        lines = "\n  ".join(stale)
        raise SystemExit(
            f"stale figures (bench-results/ changed since they were written):\n  {lines}\n"
            "run `python bench/figures.py` and commit the result"
        )


if __name__ == "__main__":
    main()
