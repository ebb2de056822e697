"""How a small local model's answers fare, through the real `openai` backend and a fake
OpenAI-compatible server (`tests/fake_chat.py`) on 127.0.0.1.

    python bench/local_model.py [--out bench-results/local_model.json] [--rounds 3]

For each answering mode of the fake (schema honoured; fenced JSON in prose; ten kinds of
almost-JSON; invalid then valid after the repair turn; garbage) and each sample transcript
in `tests/fixtures/samples/`, one whole distillation (judge, distill, and the lint's repair
round if any) runs through `distill()` on the digest the worker would send (cut to the
default 8,192-token window). It reports:

- the recovery rate: answers that came out usable, at once (`valid` or mended) or after the
  repair turn, out of all answers; the rest are rejected (the job would back off);
- the time the client adds per request over the server's own handling time (median, ms);
- the tokens of one session, from the server's usage fields (the fake counts ~4 characters
  a token, where a real server reports its tokenizer's count).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mtl_mcp.config import load_settings  # noqa: E402
from mtl_mcp.errors import DistillUnavailable  # noqa: E402
from mtl_mcp.learning.answers import answer_summary  # noqa: E402
from mtl_mcp.learning.backends.openai_compat import OpenAIBackend  # noqa: E402
from mtl_mcp.learning.distill import distill  # noqa: E402
from mtl_mcp.learning.fitting import fit_digest  # noqa: E402
from mtl_mcp.learning.pipeline import digest_transcript  # noqa: E402
from mtl_mcp.learning.spend import Usage  # noqa: E402
from tests.fake_chat import MANGLE_VARIANTS, MODEL, FakeChat  # noqa: E402

SAMPLES = sorted((ROOT / "tests" / "fixtures" / "samples").iterdir())
MODES = [
    ("schema", None),
    ("fenced", None),
    *(("almost", variant) for variant in MANGLE_VARIANTS),
    ("invalid-then-valid", None),
    ("garbage", None),
]


class TimedBackend(OpenAIBackend):
    """Times each request and what the fake spent on it."""

    def __init__(self, *args: Any, fake: FakeChat, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fake, self.added_ms = fake, []

    def _complete(self, *args: Any, **kwargs: Any) -> str:
        served, started = self.fake.served, time.perf_counter()
        try:
            return super()._complete(*args, **kwargs)
        finally:
            took = time.perf_counter() - started
            self.added_ms.append((took - (self.fake.served - served)) * 1000)


def run_mode(mode: str, variant: str | None, rounds: int) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as home,
        FakeChat(mode=mode, variant=variant or "trailing-commas", flavour="plain") as fake,
    ):
        settings = load_settings(
            Path(home), openai_base_url=fake.base_url, openai_model=MODEL, starter=False
        )
        added: list[float] = []
        sessions: list[int] = []
        failed = 0
        for _ in range(rounds):
            for sample in SAMPLES:
                backend = TimedBackend(settings, fake=fake)
                transcript, digest = digest_transcript(sample, settings)
                digest = fit_digest(transcript, digest, backend, settings)
                usage = Usage()
                try:
                    distill(digest.text, backend, usage=usage)
                    sessions.append(usage.total_tokens)
                except DistillUnavailable:
                    failed += 1
                added += backend.added_ms
                backend.close()
        counts = answer_summary(Path(home)).get("openai", {})
    total = int(counts.get("answers", 0))
    at_once = int(counts.get("valid", 0) + counts.get("recovered", 0))
    usable = at_once + int(counts.get("repaired", 0))
    return {
        "mode": mode if variant is None else f"{mode}:{variant}",
        "answers": total,
        "usable_rate": round(usable / total, 3) if total else None,
        "usable_at_once_rate": round(at_once / total, 3) if total else None,
        "counts": {k: int(v) for k, v in counts.items() if k != "reject_rate"},
        "runs_failed": failed,
        "client_ms_per_request_median": round(statistics.median(added), 2) if added else None,
        "session_tokens_median": int(statistics.median(sessions)) if sessions else None,
        "session_tokens_max": max(sessions) if sessions else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "local_model.json")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rows = [run_mode(mode, variant, args.rounds) for mode, variant in MODES]
    for row in rows:
        print(
            f"{row['mode']:28} answers {row['answers']:3}  usable {row['usable_rate']:.0%}  "
            f"at once {row['usable_at_once_rate']:.0%}  "
            f"client +{row['client_ms_per_request_median']} ms  "
            f"session tokens {row['session_tokens_median']} (max {row['session_tokens_max']})"
        )
    report = {"samples": [s.name for s in SAMPLES], "rounds": args.rounds, "modes": rows}
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
