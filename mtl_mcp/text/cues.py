"""Whether two similar lessons say opposite things, or one retires the other: rules on
their words, no model.

Paraphrases of one lesson and two lessons that disagree can be equally close in meaning
("Mock the database in unit tests" and "Never mock the database in integration tests" sit
at cosine ~0.8 with the default model, as paraphrases do), so similarity alone would merge
them. Two cues tell them apart:

- **opposite advice**: one title is negated (never, do not, don't, avoid, stop...) and the
  other is not, and the two share most of their content words. The words that differ are
  its scope ("unit" against "integration"), shown to the user, who decides whether both
  hold each in its place or one is wrong: a contradiction is flagged, never resolved here.
- **superseded**: one text marks a command or flag of the other as replaced (deprecated,
  removed, replaced, no longer, instead of, rather than, now that) and names a new one the
  other lacks: "Use `yarn install --immutable` instead of `--frozen-lockfile`" supersedes
  "Install with `yarn install --frozen-lockfile`".

Measured on the simulated year (bench/year.py): see docs/memory-health.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# Advice against: a title that opens with a negation, or says "never" anywhere. A "not"
# further on is usually a contrast ("wait on a health check, not a fixed sleep"), and "stop"
# as often positive advice ("stop at the first failure") as negative.
_NEGATION = re.compile(
    r"^(?:(?:always|remember to|make sure to)\s+)?(?:never|do not|don't|dont|avoid|skip|no|"
    r"not)\b|\bnever\b",
    re.I,
)
_WORD = re.compile(r"[a-z][a-z0-9+#-]*")
_STOP_WORDS = (
    "a an the and or of to in on at for from with by as is are be it its this that these "
    "those your you do does not never don't dont avoid stop no longer always before after "
    "when while until into than then so each every any all one only first just more most "
    "use using over under out up down off about instead rather remember"
)
_STOP = frozenset(_STOP_WORDS.split())
_DEPRECATION = re.compile(
    r"\b(?:deprecated|removed|replaced|replaces|no longer|instead of|rather than|now that|"
    r"renamed|obsolete|superseded|in place of)\b",
    re.I,
)
_CODE_SPAN = re.compile(r"`([^`]+)`")
_FLAG = re.compile(r"(?<![\w-])--?[a-z][\w=-]*")
OVERLAP_MIN = 0.5  # share of the shorter title's content words the other must hold too


def _stem(word: str) -> str:
    """A crude stem: enough to match 'tests' with 'test' and 'mocking' with 'mock'."""
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + ("y" if suffix == "ies" else "")
    return word


@lru_cache(maxsize=65536)
def _content_words(title: str) -> dict[str, str]:
    """The title's content words by their stem."""
    found: dict[str, str] = {}
    for word in _WORD.findall(title.lower()):
        if word not in _STOP:
            found.setdefault(_stem(word), word)
    return found


@lru_cache(maxsize=65536)
def negated(title: str) -> bool:
    """Whether a title advises against something."""
    return bool(_NEGATION.search(title.strip()))


def opposite_advice(title_a: str, title_b: str) -> str | None:
    """Why two titles give opposite advice, or None: one negated and one not, about mostly
    the same words. The reason names the words each has that the other lacks (its scope)."""
    if negated(title_a) == negated(title_b):
        return None
    words_a, words_b = _content_words(title_a), _content_words(title_b)
    shorter = min(len(words_a), len(words_b))
    shared = words_a.keys() & words_b.keys()
    if not shorter or len(shared) / shorter < OVERLAP_MIN:
        return None
    only_a = [w for stem, w in words_a.items() if stem not in shared]
    only_b = [w for stem, w in words_b.items() if stem not in shared]
    scope = ""
    if only_a and only_b:
        scope = f"; they differ in {' '.join(only_a)!r} against {' '.join(only_b)!r}"
    return f"opposite advice on {' '.join(words_a[s] for s in words_a if s in shared)!r}{scope}"


@lru_cache(maxsize=65536)
def code_tokens(text: str) -> frozenset[str]:
    """The commands and flags a text names: words of its `code spans`, and --flags."""
    tokens: set[str] = set()
    for span in _CODE_SPAN.findall(text):
        tokens.update(span.lower().split())
    tokens.update(flag.lower() for flag in _FLAG.findall(text) if len(flag) > 2)
    return frozenset(tokens)


@lru_cache(maxsize=65536)
def _deprecates(text: str) -> bool:
    return bool(_DEPRECATION.search(text))


def supersedes(newer: str, older: str) -> str | None:
    """Why the lesson `newer` supersedes `older` (each its full text), or None: `newer`
    marks something as replaced, names a command or flag of `older`, and one `older`
    lacks; `older` marks nothing as replaced itself."""
    if not _deprecates(newer) or _deprecates(older):
        return None
    new_tokens, old_tokens = code_tokens(newer), code_tokens(older)
    shared, added = new_tokens & old_tokens, new_tokens - old_tokens
    if not shared or not added:
        return None
    return f"says `{_salient(shared)}` changed, and names `{_salient(added)}`"


def _salient(tokens: frozenset[str]) -> str:
    """The token most likely to be the point: the longest --flag, else the longest one."""
    flags = [t for t in tokens if t.startswith("--")]
    return max(sorted(flags or tokens), key=len)


@dataclass(frozen=True)
class Lesson:
    """What the cues read of an insight: its title and its whole text."""

    title: str
    text: str


def conflict(a: Lesson, b: Lesson) -> tuple[str, str] | None:
    """('contradicts', why), ('supersedes', why) when `a` supersedes `b`, ('superseded',
    why) when `b` supersedes `a`, or None when the cues see no difference."""
    if why := supersedes(a.text, b.text):
        return "supersedes", why
    if why := supersedes(b.text, a.text):
        return "superseded", why
    if why := opposite_advice(a.title, b.title):
        return "contradicts", why
    return None
