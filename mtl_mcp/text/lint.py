"""The abstraction lint: is an insight a transferable lesson, or a note about one task?

A pure function. Secrets and empty fields reject an insight; concrete details (paths, URLs,
long identifiers, hashes, line numbers, version pins, the project's own name) lower its
`abstraction_score` and come back as warnings the assistant can act on.

`project_facts` is the stricter gate for insights distilled from notes an assistant keeps
(its memory files, a project's CLAUDE.md or AGENTS.md): such notes are mostly facts about
one project, so there every concrete detail, and any sign of a statement about one project
or one user, rejects the insight.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mtl_mcp.schemas import InsightDraft
from mtl_mcp.text.poisoning import instructions_to_assistant
from mtl_mcp.text.redact import find_secrets, redact

# (label, pattern, advice, penalty): each finding lowers the score by its penalty.
_CHECKS: tuple[tuple[str, re.Pattern[str], str, float], ...] = (
    (
        "URL",
        re.compile(r"\b(?:https?|ftp|ssh|git|file)://\S+|\bwww\.\w[\w.-]+\.\w{2,}", re.I),
        "describe the kind of resource instead of linking it",
        0.25,
    ),
    (
        "file path",
        re.compile(
            r"(?:(?<![\w/])(?:~|\.{1,2})?/(?:[\w.@+-]+/)+[\w.@+-]*)"
            r"|(?:\b[A-Za-z]:\\[\w\\. -]+)"
            r"|(?:\b[\w-]+/[\w./-]*\.(?:py|js|ts|tsx|jsx|go|rs|java|rb|c|h|cpp|md|json|ya?ml|toml|cfg|ini|txt|sh|sql|lock)\b)"
        ),
        "name the kind of file (e.g. 'the test module') instead of its path",
        0.2,
    ),
    (
        "file name",
        re.compile(
            r"\b[\w-]{2,}\.(?:py|js|ts|tsx|jsx|go|rs|java|rb|cpp|json|ya?ml|toml|cfg|ini|lock|sql)\b"
        ),
        "say what the file is for instead of naming it",
        0.1,
    ),
    (
        "line number",
        re.compile(r"\b(?:line|ln|L)\s?#?\d+\b|:\d+:\d+\b", re.I),
        "line numbers do not transfer: describe the construct instead",
        0.15,
    ),
    (
        "version pin",
        re.compile(r"(?:==|>=|<=|~=|@\^?|\bv)\d+(?:\.\d+)+\b|\b\d+\.\d+\.\d+\b"),
        "state the behaviour that changed, not the version number",
        0.15,
    ),
    (
        "hash or long identifier",
        re.compile(r"\b[0-9a-f]{12,}\b|\b[A-Za-z]\w*_\w+_\w+_\w+\b|\b\w{32,}\b"),
        "replace task-specific identifiers with what they stand for",
        0.15,
    ),
)
# Marks of a statement about one project or one person rather than a lesson: the project
# speaking of itself, its services and settings, its people's preferences.
_FACT_MARKERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "it speaks of one project",
        re.compile(
            r"\b(?:this|our|the current|the same)\s+(?:project|repo|repository|codebase|"
            r"monorepo|app|application|service|team|company|organi[sz]ation|workspace)\b",
            re.I,
        ),
    ),
    ("it speaks for a team (we, our, us)", re.compile(r"\b(?:[Ww]e|[Oo]ur|us)\b")),
    (
        "it names a host or port",
        re.compile(r"\blocalhost\b|\b127\.0\.0\.1\b|\bport\s+\d{2,5}\b|:\d{4,5}\b", re.I),
    ),
    ("it names a setting (an environment variable)", re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")),
    (
        "it says where something lives",
        re.compile(
            r"\b(?:lives?|kept|stored|located)\s+(?:in|under)\s+(?:the\s+)?"
            r"(?:[\w.-]+/|[\w.-]+\s+(?:folder|directory)\b)",
            re.I,
        ),
    ),
    (
        "it names a branch",
        re.compile(
            r"\b(?:main|master|develop|trunk|gh-pages)\s+branch\b"
            r"|\b(?:against|into|onto)\s+(?:main|master|develop)\b"
        ),
    ),
    (
        "it records a person's preference",
        re.compile(
            r"\b(?:the user|the owner|the maintainers?|the team)\s+"
            r"(?:prefers?|wants?|likes?|dislikes?|asked|insists?|requires?)\b",
            re.I,
        ),
    ),
)
_MIN_WORDS = {"title": 2, "content": 6}
_ABBREVIATIONS = re.compile(r"\b(?:e\.g|i\.e|etc|vs|cf)\.", re.I)


@dataclass
class LintReport:
    """The verdict on one draft: errors reject it, warnings lower its score."""

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    score: float = 1.0

    @property
    def ok(self) -> bool:
        return not self.errors


def lint(draft: InsightDraft, project_name: str | None = None) -> LintReport:
    """Check one draft for secrets, emptiness and task-specific detail."""
    report = LintReport()
    texts = {"title": draft.title, "description": draft.description, "content": draft.content}
    for name, text in texts.items():
        if len(text.split()) < _MIN_WORDS.get(name, 1):
            report.errors.append(
                f"{name} is too short to be a lesson: "
                f"write at least {_MIN_WORDS.get(name, 1)} words"
            )
    everything = "\n".join([*texts.values(), *draft.tags, *draft.languages, draft.domain or ""])
    for secret in find_secrets(everything):
        report.errors.append(
            f"contains a secret ({secret.kind}): remove it; secrets never enter the memory"
        )
    for kind in instructions_to_assistant(everything):
        report.errors.append(
            f"reads as an instruction to the assistant ({kind}), not a lesson: recalled "
            "insights are reference notes, so state what worked or failed instead"
        )
    penalty = 0.0
    for warning, cost in _concrete_details(texts, project_name):
        report.warnings.append(warning)
        penalty += cost
    prose = _ABBREVIATIONS.sub("", draft.content.strip())
    sentences = len(re.findall(r"[.!?](?:\s|$)", prose + " "))
    if sentences > 3:
        report.warnings.append(f"content has {sentences} sentences: keep it to 1-3")
        penalty += 0.1
    report.score = round(max(0.0, 1.0 - penalty), 3)
    return report


def _concrete_details(texts: dict[str, str], project_name: str | None) -> list[tuple[str, float]]:
    """(warning, penalty) for each kind of concrete detail in the named texts."""
    found: list[tuple[str, float]] = []
    # Warnings quote what they flag, back to the caller and into logs: a secret the lint
    # rejects must not ride along, whole or in part, so they quote the redacted text.
    quotable = {name: redact(text) for name, text in texts.items()}
    for label, pattern, advice, cost in _CHECKS:
        for name, text in quotable.items():
            hits = sorted(set(pattern.findall(text)))
            if hits:
                found.append(
                    (
                        f"{name} has a {label} ({', '.join(hits[:3])}): {advice}",
                        cost * min(len(hits), 2),
                    )
                )
    if project_name and len(project_name) >= 3:
        own_name = re.compile(rf"\b{re.escape(project_name)}\b", re.I)
        if any(own_name.search(text) for text in texts.values()):
            found.append(
                (
                    f"mentions this project's name ({redact(project_name)!r}): "
                    "the lesson should hold in any project",
                    0.2,
                )
            )
    return found


def project_facts(draft: InsightDraft, project_name: str | None = None) -> list[str]:
    """Why `draft` reads as a fact about one project or person rather than a lesson that
    transfers (empty: it reads as a lesson). Every concrete detail the lint warns of counts,
    and so does each marker of a statement about one project."""
    texts = {"title": draft.title, "description": draft.description, "content": draft.content}
    problems = [warning for warning, _ in _concrete_details(texts, project_name)]
    for reason, pattern in _FACT_MARKERS:
        for name, text in texts.items():
            hits = sorted({m.group(0) for m in pattern.finditer(redact(text))})
            if hits:
                problems.append(
                    f"{name} reads as a fact about one project, not a lesson: {reason} "
                    f"({', '.join(hits[:3])}); keep only what holds in any project"
                )
    return problems
