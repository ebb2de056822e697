"""Abstraction measures: hand-checked on toy points, then trajectories against insights."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from mtl_mcp import Memory
from mtl_mcp.cli import cli
from mtl_mcp.quality.abstraction import davies_bouldin, lisi, measure, specificity
from mtl_mcp.quality.evaluation import load_pool, shipped_set
from mtl_mcp.schemas import InsightDraft
from tests.conftest import lesson

# What a raw session trace of each domain looks like: commands, paths and outputs.
TRACE_STEPS = {
    "web-backend": [
        "$ curl -s -X POST localhost:8000/api/{w} -d @payload.json",
        "HTTP/1.1 500 Internal Server Error",
        "$ pytest tests/api/test_{w}.py -x -q",
        "E   KeyError: '{w}_id'",
        "$ grep -rn '{w}' app/routes/",
    ],
    "data-science": [
        ">>> df = pd.read_csv('data/{w}.csv'); df.shape",
        ">>> df['{w}'].isna().sum()",
        "SettingWithCopyWarning: A value is trying to be set on a copy",
        "$ jupyter nbconvert --execute notebooks/{w}.ipynb",
        ">>> train_test_split(X, y, test_size=0.2)",
    ],
    "devops-shell": [
        "$ bash -x scripts/{w}.sh /var/log/app",
        "+ find /var/log/app -mtime +7 -delete",
        "$ journalctl -u {w}.service --since today",
        "sed: -i requires an argument",
        "$ crontab -l | grep {w}",
    ],
    "embedded": [
        "$ arm-none-eabi-gcc -O2 -mcpu=cortex-m4 src/{w}.c -o build/fw.elf",
        "UART: {w} read timeout on I2C1",
        "HardFault_Handler at 0x08001f3c",
        "$ minicom -D /dev/ttyUSB0 -b 115200",
        "$ make flash TARGET={w}",
    ],
    "ml-training": [
        "$ python train.py --config configs/{w}.yaml --epochs 90",
        "epoch 3 | loss nan | lr 0.1",
        "CUDA out of memory. Tried to allocate 2.00 GiB",
        "$ tensorboard --logdir runs/{w}",
        "torch.save(model.state_dict(), 'ckpt/{w}.pt')",
    ],
    "competitive-programming": [
        "$ g++ -O2 -std=c++17 {w}.cpp -o sol && ./sol < tests/in3.txt",
        "Time limit exceeded on test 7 (n = 200000)",
        "RecursionError: maximum recursion depth exceeded",
        "Wrong answer on test 12",
        "$ ./brute < rand.txt > b.txt",
    ],
}


def trajectory(seed: int, draft: InsightDraft) -> str:
    """A trajectory-like record of the session an insight came from: its task, four steps of
    its domain's commands and outputs (varying per session), and the lesson as a note."""
    rng = random.Random(seed)
    words = [w for w in draft.title.lower().replace("'", "").split() if len(w) > 3] or ["task"]
    word = rng.choice(words)
    steps = rng.sample(TRACE_STEPS[str(draft.domain)], 4)
    return "\n".join(
        [f"task: {draft.description}", *(s.format(w=word) for s in steps), draft.content]
    )


def test_davies_bouldin_matches_a_hand_computation() -> None:
    """Two clusters of spread 1 whose centroids are 10 apart: (1 + 1) / 10 = 0.2."""
    points = np.array([[0, 0], [2, 0], [10, 0], [12, 0]], dtype=np.float32)
    assert davies_bouldin(points, ["a", "a", "b", "b"]) == pytest.approx(0.2)
    with pytest.raises(ValueError, match="two domains"):
        davies_bouldin(points, ["a"] * 4)


def test_lisi_is_one_for_separated_domains_and_two_for_interleaved_ones() -> None:
    """Neighbours all from one's own domain give 1; interleaved domains approach 2."""
    angles = np.radians([0, 1, 2, 3, 90, 91, 92, 93])
    points = np.stack([np.cos(angles), np.sin(angles)], axis=1).astype(np.float32)
    apart = ["a"] * 4 + ["b"] * 4
    assert lisi(points, apart, k=3) == pytest.approx(np.ones(8))
    assert specificity(points, apart, k=3) == pytest.approx(np.ones(8))
    mixed = ["a", "b"] * 4  # within each group of four, two of each
    # k=3 excludes the point itself: 2 of the other domain and 1 of its own (or vice versa).
    assert lisi(points, mixed, k=3) == pytest.approx(np.full(8, 1 / (1 / 9 + 4 / 9)))


def test_abstract_insights_mix_domains_more_than_trajectories_of_the_same_sessions(
    store: Memory,
) -> None:
    """Insights score higher LISI and lower specificity than trajectory-like texts of the
    same sessions, and their domains are harder to separate (higher Davies-Bouldin)."""
    pool = [i for i in load_pool(shipped_set()[0]) if i.draft.domain in TRACE_STEPS]
    domains = [i.draft.domain for i in pool]
    insights = store.embedder.embed_documents([i.draft.embedding_text() for i in pool])
    traces = store.embedder.embed_documents([trajectory(n, i.draft) for n, i in enumerate(pool)])
    abstract, concrete = measure(insights, domains), measure(traces, domains)
    assert abstract.mean_lisi is not None and concrete.mean_lisi is not None
    assert abstract.mean_lisi > concrete.mean_lisi + 1.0
    assert abstract.mean_specificity is not None and concrete.mean_specificity is not None
    assert abstract.mean_specificity < concrete.mean_specificity
    # Standard DBI falls as clusters separate: the paper's 6.50 -> 2.33 is not this direction
    # (README, "Abstraction"); what holds here is that trajectories separate by domain.
    assert abstract.davies_bouldin is not None and concrete.davies_bouldin is not None
    assert abstract.davies_bouldin > concrete.davies_bouldin


def test_stats_abstraction_reports_the_measures_as_json(store: Memory) -> None:
    """`stats --abstraction --json` adds DBI, LISI and the most domain-specific insights."""
    store.record(
        [
            lesson(title, f"{title} before anything else, then carry on.", domain=d)
            for title, d in [
                ("Reproduce the reported bug in a test", "web-backend"),
                ("Version every public response format", "web-backend"),
                ("Profile a sample of the raw data", "data-science"),
                ("Seed every random number generator", "data-science"),
                ("Quote variables in shell scripts", "devops-shell"),
            ]
        ]
        + [lesson("Read the whole traceback", "The last line names the cause of the crash.")]
    )
    result = CliRunner().invoke(cli, ["stats", "--abstraction", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)["abstraction"]
    assert report["insights"] == 5 and report["unlabelled"] == 1 and report["domains"] == 3
    assert report["davies_bouldin"] > 0 and 1 <= report["mean_lisi"] <= 3
    assert len(report["most_specific"]) == 5
    text = CliRunner().invoke(cli, ["stats", "--abstraction"]).stdout
    assert "Davies-Bouldin" in text and "LISI" in text
