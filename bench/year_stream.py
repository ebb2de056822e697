"""Write the simulated year's stream: what a distiller would produce over a year of sessions.

    python bench/year_stream.py            # rewrite bench/data/ and tests/fixtures/year/
    python bench/year_stream.py --check    # exit 1 if the committed files are stale

No model is involved: the paraphrases are made by hand-written rules (synonym swaps,
framing of the description and the content, sentence reordering, a dropped sentence) with a
fixed seed, so the stream is the same on every machine and does not depend on the
embedding model. `bench/year.py` measures how similar the paraphrases came out.

Two files per stream, kept apart so that the product never sees the truth:
- `year.jsonl`: one session per line, in time order: its day, project, client, the plan
  it recalled for, and the insights distilled from it (`n`, `draft`);
- `year-labels.json`: for every insight `n`, the lesson it expresses and whether it is
  the lesson's original wording or a paraphrase; for every session, the lesson whose
  situation its plan describes; for every lesson, its kind (eval, paraphrase, fact,
  contradiction, supersedes, misleading) and partner.

The full year (bench/data/) has every lesson of the shipped evaluation pool and about
2,000 insights; the small one (tests/fixtures/year/) a few of each kind, for the tests.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from year_material import (
    CONTENT_CLOSERS,
    CONTENT_OPENERS,
    CONTEXT_SENTENCES,
    CONTRADICTIONS,
    DESCRIPTION_FRAMES,
    EXTRA_LESSONS,
    FACT_TEMPLATES,
    FACT_VALUES,
    IMPERATIVES,
    MISLEADING,
    PLAN_TEMPLATES,
    PROJECTS,
    SUPERSESSIONS,
    SYNONYMS,
    TITLE_FRAMES,
)

ROOT = Path(__file__).resolve().parent.parent
EVAL = ROOT / "mtl_mcp" / "data" / "eval"
SEED = 28
CLIENTS = ["claude-code", "cursor", "codex", "gemini-cli"]


# -- paraphrasing -------------------------------------------------------------------------

_PHRASES = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in sorted(SYNONYMS, key=len, reverse=True)) + r")\b",
    re.I,
)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`])")
_CODE = re.compile(r"(`[^`]*`)")
_NEGATIVE_START = ("never", "don't", "do", "avoid", "a", "an", "the", "always", "stop")


def _swap(text: str, rng: random.Random, p: float) -> str:
    """Swap whole words and phrases for synonyms, outside code spans, each with chance p."""

    def one(match: re.Match[str]) -> str:
        word = match.group(0)
        if rng.random() >= p:
            return word
        choice = rng.choice(SYNONYMS[word.lower()])
        return choice[0].upper() + choice[1:] if word[0].isupper() else choice

    parts = _CODE.split(text)
    return "".join(part if part.startswith("`") else _PHRASES.sub(one, part) for part in parts)


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if text and not text[:2].isupper() else text


def _rule(content: str) -> str | None:
    """The content's rule, shortened into a title: its first sentence that reads as an
    imperative, cut at its first comma or colon; None if it has none or it is too long."""
    for sentence in _SENTENCE.split(content.strip()):
        words = sentence.split()
        if not words or words[0].lower().strip(",") not in IMPERATIVES:
            continue
        head = re.split(r"[,;:]|\bso\b|\bbecause\b", sentence, maxsplit=1)[0].strip(" .")
        pronoun = head.split()[-1].lower() in ("it", "them", "this", "that", "these", "those")
        if 3 <= len(head.split()) <= 14 and len(head) <= 90 and "`" not in head and not pronoun:
            return head
    return None


def paraphrase(draft: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    """Another session's wording of the same lesson."""
    strength = rng.uniform(0.25, 0.7)
    rule = _rule(draft["content"])
    # Another session names the lesson by its rule as often as by the original's words.
    title = rule if rule and rng.random() < 0.25 else draft["title"]
    title = _swap(title, rng, strength)
    first = title.split()[0].lower()
    frame = rng.choice(TITLE_FRAMES)
    if first in _NEGATIVE_START or first not in IMPERATIVES or rng.random() < 0.5:
        frame = "{text}"
    title = frame.format(text=title, text_lower=_lower_first(title))

    description = _swap(draft["description"], rng, strength)
    if description.lower().startswith(("when ", "whenever ", "while ", "before ", "after ")):
        frame = rng.choice(DESCRIPTION_FRAMES)
        description = frame.format(text=description, text_lower=_lower_first(description))

    sentences = _SENTENCE.split(draft["content"].strip())
    # This session's story differs: a sentence of the original left out, one of its own
    # added, or both.
    if rng.random() < 0.4:  # a clause of the original left out
        cut = rng.randrange(len(sentences))
        head = re.split(r"[,;:] (?=[^,;:]*$)", sentences[cut].rstrip("."), maxsplit=1)[0]
        if len(head.split()) >= 6:
            sentences[cut] = head.rstrip(" ,;:") + "."
    # Sentences of its own, in proportion to the lesson's length: a short lesson retold
    # with one more sentence is already another text.
    words = len(draft["content"].split())
    wanted, added = rng.uniform(0.15, 0.45) * words, 0
    for sentence in rng.sample(CONTEXT_SENTENCES, len(CONTEXT_SENTENCES)):
        if added >= wanted:
            break
        sentences.insert(rng.randrange(len(sentences) + 1), sentence)
        added += len(sentence.split())
    if rng.random() < 0.5:
        i = rng.randrange(len(sentences) - 1)
        sentences[i], sentences[i + 1] = sentences[i + 1], sentences[i]
    content = " ".join(_swap(s, rng, strength) for s in sentences)
    opener = rng.choice(CONTENT_OPENERS) if rng.random() < 0.4 else ""
    closer = rng.choice(CONTENT_CLOSERS) if rng.random() < 0.3 else ""
    content = (opener + (_lower_first(content) if opener else content)).rstrip() + closer
    return {**draft, "title": title[:100], "description": description, "content": content}


# -- the lessons --------------------------------------------------------------------------


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def _draft(line: dict[str, Any]) -> dict[str, Any]:
    keep = ("title", "description", "content", "polarity", "category", "domain")
    return {k: line[k] for k in (*keep, "languages", "tags") if k in line}


def lessons(small: bool, rng: random.Random) -> list[dict[str, Any]]:
    """Every lesson of the year: id, kind, canonical draft, arrivals and when they come."""
    pool = _jsonl(EVAL / "pool.jsonl")
    planted = {line["id"]: line for line in _jsonl(EVAL / "planted.jsonl")}
    table: list[dict[str, Any]] = []

    def add(lesson_id: str, kind: str, draft: dict[str, Any], **extra: Any) -> None:
        table.append({"id": lesson_id, "kind": kind, "draft": draft, **extra})

    if small:
        queries = _jsonl(EVAL / "queries.jsonl")[:12]
        wanted = {r for q in queries for r in q["relevant"]}
        pool = [line for line in pool if line["id"] in wanted]
    for line in pool:
        add(line["id"], "eval", _draft(line))
    for lesson in EXTRA_LESSONS[: 4 if small else None]:
        add(lesson["key"], "paraphrase", lesson["draft"])
    for a, b, scoped in CONTRADICTIONS[:1] + CONTRADICTIONS[3:4] if small else CONTRADICTIONS:
        add(a["key"], "contradiction", a["draft"], partner=b["key"], scoped=scoped)
        add(
            b["key"], "contradiction", b["draft"], partner=a["key"], scoped=scoped, wrong=not scoped
        )
    for old, new in SUPERSESSIONS[: 1 if small else None]:
        add(old["key"], "supersedes", old["draft"], partner=new["key"], role="old")
        add(new["key"], "supersedes", new["draft"], partner=old["key"], role="new")
    for key in MISLEADING[: 2 if small else None]:
        add(key, "misleading", _draft(planted[key]), wrong=True)
    projects = PROJECTS[:4] if small else PROJECTS
    for number, ((project, domain), values) in enumerate(zip(projects, FACT_VALUES, strict=False)):
        chosen = rng.sample(range(len(FACT_TEMPLATES)), 2 if small else 4)
        for template in chosen:
            title, description, content = FACT_TEMPLATES[template]
            filled = {
                "title": title.format(**values),
                "description": description.format(**values),
                "content": content.format(**values),
                "domain": domain,
            }
            # Each project's session words its fact its own way.
            draft = {**paraphrase(filled, rng), "domain": domain}
            add(f"f{number:02d}{template}", "fact", draft, project=project)
    return table


def _arrivals(lesson: dict[str, Any], days: int, rng: random.Random, small: bool) -> list[int]:
    """The days a lesson is distilled, in order (its first arrival is its original wording)."""
    kind = lesson["kind"]
    if kind == "fact":
        count = rng.choice([1, 1, 2, 3])
        first = rng.uniform(0, 0.9 * days)
    elif kind == "misleading":
        count = rng.randint(3, 5)
        first = rng.uniform(0.05 * days, 0.5 * days)
    else:
        count = max(3, min(30, round(rng.lognormvariate(2.37, 0.45))))
        if small:
            count = max(3, count // 2)
        first = rng.uniform(0, (0.45 if kind == "eval" else 0.7) * days)
    start, end = first, float(days)
    if lesson.get("role") == "old":
        start, end = rng.uniform(0, 0.15 * days), 0.5 * days
    elif lesson.get("role") == "new":
        start, end = 0.55 * days, float(days)
    later = sorted(rng.uniform(start, end) for _ in range(count - 1))
    return [int(start)] + [int(day) for day in later]


def _project_of(lesson: dict[str, Any], projects: list[tuple[str, str]], rng: random.Random) -> str:
    if lesson["kind"] == "fact":
        return str(lesson["project"])
    own = [name for name, domain in projects if domain == lesson["draft"].get("domain")]
    if own and rng.random() < 0.8:
        return own[0]
    return rng.choice(projects)[0]


def plan_for(situation: str, rng: random.Random) -> str:
    situation = situation.strip()
    bare = re.sub(r"^(?:when|whenever|while)\s+", "", situation, flags=re.I)
    bare = bare[0].upper() + bare[1:]
    template = rng.choice(PLAN_TEMPLATES)
    return template.format(situation=bare, situation_lower=_lower_first(bare))


def build(small: bool, seed: int = SEED) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The sessions of the year and the labels."""
    rng = random.Random(seed)
    days = 120 if small else 365
    projects = PROJECTS[:4] if small else PROJECTS
    table = lessons(small, rng)
    if small:  # the small year has only its projects' domains: keep lessons there
        domains = {domain for _, domain in projects}
        for lesson in table:
            if lesson["kind"] == "paraphrase" and lesson["draft"]["domain"] not in domains:
                lesson["draft"] = {**lesson["draft"], "domain": rng.choice(sorted(domains))}
    by_domain: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for lesson in table:
        if lesson["kind"] in ("eval", "paraphrase"):
            by_domain[lesson["draft"]["domain"]].append(lesson)
    arrivals: list[tuple[int, str, dict[str, Any], int]] = []
    for lesson in table:
        for number, day in enumerate(_arrivals(lesson, days, rng, small)):
            arrivals.append((day, _project_of(lesson, projects, rng), lesson, number))
    arrivals.sort(key=lambda a: (a[0], a[1], rng.random()))

    sessions: list[dict[str, Any]] = []
    items: dict[str, dict[str, str]] = {}
    situations: dict[str, str] = {}  # the lesson whose situation each session's plan is
    n = 0
    grouped: dict[tuple[int, str], list[tuple[dict[str, Any], int]]] = defaultdict(list)
    for day, project, lesson, number in arrivals:
        grouped[(day, project)].append((lesson, number))
    domain_of = dict(projects)
    for (day, project), found in sorted(grouped.items()):
        start = 0
        while start < len(found):
            size = rng.choice([1, 1, 2, 3])
            batch, start = found[start : start + size], start + size
            lead = batch[0][0]
            if lead["kind"] in ("eval", "paraphrase", "contradiction", "supersedes", "misleading"):
                pick = lead
            else:  # a fact: the session worked on something of the project's kind
                pick = rng.choice(by_domain.get(domain_of[project]) or table)
            situations[f"s{len(sessions):05d}"] = pick["id"]
            insights = []
            for lesson, number in batch:
                n += 1
                draft = lesson["draft"] if number == 0 else paraphrase(lesson["draft"], rng)
                if lesson["kind"] == "paraphrase" and number:
                    draft = {**draft, "domain": domain_of[project]}
                insights.append({"n": n, "draft": draft})
                form = "original" if number == 0 else "paraphrase"
                items[str(n)] = {"lesson": lesson["id"], "form": form}
            sessions.append(
                _session(len(sessions), day, project, pick["draft"]["description"], insights, rng)
            )
            # Many sessions teach nothing new: one of the same project that day, every
            # other time, only recalls.
            for _ in range(rng.choice([0, 1])):
                pick = rng.choice(by_domain.get(domain_of[project]) or table)
                situations[f"s{len(sessions):05d}"] = pick["id"]
                sessions.append(
                    _session(len(sessions), day, project, pick["draft"]["description"], [], rng)
                )
    labels = {
        "seed": seed,
        "days": days,
        "items": items,
        "situations": situations,
        "lessons": {
            lesson["id"]: {
                k: lesson[k] for k in ("kind", "partner", "scoped", "wrong", "role") if k in lesson
            }
            for lesson in table
        },
    }
    return sessions, labels


def _session(
    number: int,
    day: int,
    project: str,
    situation: str,
    insights: list[dict[str, Any]],
    rng: random.Random,
) -> dict[str, Any]:
    return {
        "session": f"s{number:05d}",
        "day": day,
        "project": project,
        "client": rng.choice(CLIENTS),
        "plan": plan_for(situation, rng),
        "insights": insights,
    }


def outputs() -> dict[Path, str]:
    """Every file this script writes, with its text."""
    files = {}
    for small, folder in (
        (False, ROOT / "bench" / "data"),
        (True, ROOT / "tests" / "fixtures" / "year"),
    ):
        sessions, labels = build(small)
        stream = "".join(json.dumps(s, ensure_ascii=False) + "\n" for s in sessions)
        files[folder / "year.jsonl"] = stream
        files[folder / "year-labels.json"] = json.dumps(labels, indent=1, sort_keys=True) + "\n"
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="Fail if the files are stale.")
    args = parser.parse_args()
    stale = []
    for path, text in outputs().items():
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        if args.check:
            stale.append(str(path.relative_to(ROOT)))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        count = text.count("\n")
        print(f"wrote {path.relative_to(ROOT)} ({count} lines)", file=sys.stderr)
    if stale:
        raise SystemExit(f"stale: {', '.join(stale)}: run `python bench/year_stream.py`")


if __name__ == "__main__":
    main()
