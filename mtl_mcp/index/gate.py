"""The relevance gate: the probability that a recalled insight helps the plan it was recalled
for, from what the ranking already computed. It decides what is put in front of a model
unasked (the plan hook, the session-start context); a recall the model asks for keeps its
top k, each hit with its probability `p`.

The signals, per candidate, measured against every candidate the recall considered:

- `similarity_z`: its cosine similarity to the plan, in standard deviations above the mean
  over the candidates. A raw cosine says little on its own: one plan sits at 0.3 from
  everything, another at 0.5; what stands out from the rest is what fits.
- `keyword`: log(1 + its BM25 score / the mean BM25 score of the candidates that share a
  word with the plan); 0 when it shares none.

p = 1 / (1 + exp(-(intercept + sum of weight * signal))), a logistic regression fitted on the
shipped evaluation set's dev split (`python bench/relevance_floor.py --fit`, which writes
`mtl_mcp/data/gate.json`; docs/retrieval.md, "The relevance gate", says how the signals and
the threshold were chosen, and what did not earn a place). `mtl-mcp tune gate` refits the
weights on a user's own session verdicts, with the shipped fit as the prior, into
`<home>/gate.json`, which then takes precedence.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from mtl_mcp.errors import ConfigError
from mtl_mcp.files import write_private
from mtl_mcp.schemas import RecallHit

if TYPE_CHECKING:  # numpy only where p is computed: the CLI, so every hook, imports this
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float32]
    Signals = npt.NDArray[np.float64]  # one row per candidate, one column per SIGNALS name

SIGNALS = ("similarity_z", "keyword")
GATE_FILE = "gate.json"  # a tuned gate, in the data directory


@dataclass(frozen=True)
class Gate:
    """A fitted gate: p = sigmoid(intercept + weights . signals)."""

    intercept: float
    weights: tuple[float, ...]  # aligned with SIGNALS
    source: str = "shipped"  # "shipped", or "tuned" on the user's verdicts
    fitted_on: str = ""  # what it was fitted on, in a few words

    def probabilities(self, signals: Signals) -> npt.NDArray[np.float64]:
        import numpy as np

        if not len(signals):
            return np.zeros(0)
        z = self.intercept + signals @ np.asarray(self.weights, dtype=np.float64)
        return 1.0 / (1.0 + np.exp(-z))

    def to_json(self) -> dict[str, object]:
        return {
            "signals": list(SIGNALS),
            "intercept": self.intercept,
            "weights": dict(zip(SIGNALS, self.weights, strict=True)),
            "source": self.source,
            "fitted_on": self.fitted_on,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object], where: str) -> Gate:
        weights = data.get("weights")
        intercept = data.get("intercept")
        if (
            not isinstance(weights, dict)
            or set(weights) != set(SIGNALS)
            or not isinstance(intercept, int | float)
            or not all(isinstance(w, int | float) and math.isfinite(w) for w in weights.values())
            or not math.isfinite(intercept)
        ):
            raise ConfigError(
                f"{where} is not a relevance gate of this version (signals {', '.join(SIGNALS)})"
                ": delete it (`mtl-mcp tune gate --reset`) to use the shipped fit"
            )
        return cls(
            intercept=float(intercept),
            weights=tuple(float(weights[name]) for name in SIGNALS),
            source=str(data.get("source") or "tuned"),
            fitted_on=str(data.get("fitted_on") or ""),
        )


def hit_signals(
    similarity: Floats,
    keyword: Floats | None,
    hit_similarity: Floats,
    hit_keyword: Floats | None,
) -> Signals:
    """The gate's signals of some hits (their cosine and BM25 scores), measured against
    every candidate the recall considered (`similarity`, `keyword`). Without a keyword
    ranking the keyword signal is 0."""
    import numpy as np

    found = np.zeros((len(hit_similarity), len(SIGNALS)), dtype=np.float64)
    if not len(found):
        return found
    cosine = similarity.astype(np.float64)
    spread = float(cosine.std())
    if spread > 0:
        found[:, 0] = (hit_similarity.astype(np.float64) - float(cosine.mean())) / spread
    if keyword is not None and hit_keyword is not None:
        matched = keyword[keyword > 0]
        if len(matched):
            found[:, 1] = np.log1p(hit_keyword.astype(np.float64) / float(matched.mean()))
    return found


H = TypeVar("H", bound=RecallHit)


UNASKED_TOP_K = 3  # the plan hook chooses among its plan's top 3 (the paper's k)
UNASKED_PER_PLAN = 1  # notes put before a model unasked for one plan, at most


def unasked_positions(chances: Sequence[float | None], min_p: float) -> list[int]:
    """Which of a plan's hits (their gate probabilities, in rank order) may be put before a
    model unasked: the UNASKED_PER_PLAN most probable that reach `min_p`, in rank order.

    One note a plan, not every one that passes: on the dev split a plan's most probable
    note is relevant far more often than the others that pass beside it, and a second note
    allowed when close to the first did no better (`bench/relevance_floor.py`;
    docs/retrieval.md, "The relevance gate")."""
    passing = [(-c, n) for n, c in enumerate(chances) if c is not None and c >= min_p]
    return sorted(n for _, n in sorted(passing)[:UNASKED_PER_PLAN])


def unasked(hits: Sequence[H], min_p: float) -> list[H]:
    """The hits of one plan that may be put before a model unasked (`unasked_positions`)."""
    return [hits[n] for n in unasked_positions([hit.p for hit in hits], min_p)]


def _read(path: Path, where: str) -> Gate:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(
            f"{where} cannot be read ({exc}): delete it (`mtl-mcp tune gate --reset`) to use "
            "the shipped fit"
        ) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{where} is not a JSON object: delete it (`mtl-mcp tune gate --reset`)")
    return Gate.from_json(data, where)


def shipped_gate_path() -> Path:
    return Path(str(resources.files("mtl_mcp").joinpath("data", GATE_FILE)))


_SHIPPED: list[Gate] = []
_LOCK = threading.Lock()


def shipped_gate() -> Gate:
    """The fit that ships with mtl-mcp (read once per process)."""
    with _LOCK:
        if not _SHIPPED:
            _SHIPPED.append(_read(shipped_gate_path(), "the shipped gate"))
        return _SHIPPED[0]


class GateFile:
    """The gate of one data directory: its tuned `gate.json` if there is one, else the
    shipped fit. Re-read when the file changes, for a stat's cost (`tune gate` may write it
    while a service runs)."""

    def __init__(self, home: Path) -> None:
        self.path = home / GATE_FILE
        self._lock = threading.Lock()
        self._cached: tuple[int, Gate] | None = None

    def current(self) -> Gate:
        try:
            stamp = self.path.stat().st_mtime_ns
        except OSError:
            return shipped_gate()
        with self._lock:
            if self._cached is None or self._cached[0] != stamp:
                self._cached = (stamp, _read(self.path, str(self.path)))
            return self._cached[1]

    def write(self, gate: Gate) -> None:
        write_private(self.path, json.dumps(gate.to_json(), indent=2) + "\n")

    def reset(self) -> bool:
        """Go back to the shipped fit; whether there was a tuned gate to remove."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True


__all__ = [
    "GATE_FILE",
    "SIGNALS",
    "UNASKED_PER_PLAN",
    "UNASKED_TOP_K",
    "Gate",
    "GateFile",
    "hit_signals",
    "shipped_gate",
    "unasked",
    "unasked_positions",
]
