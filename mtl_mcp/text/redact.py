"""Secret redaction, applied to any text before it leaves the machine or is stored.

Pure and fast: a small list of precompiled, linear regexes (every quantifier that can
meet a failing suffix is bounded), plus two hand-written scanners for the cases a
regex handles badly (`NAME=value` assignments and `<private>` fences). Findings never
overlap; when two candidates overlap their union is redacted, so a secret is never
half-kept because another pattern claimed part of it.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SecretFinding", "find_secrets", "redact", "uri_without_secrets"]


@dataclass(frozen=True)
class SecretFinding:
    """One secret in a text: `text[start:end]` is what gets replaced."""

    kind: str
    start: int
    end: int


# A token prefix must not continue an identifier ("xghp_..." or "the_hf_..." are words).
# Checked in Python, not by a leading lookbehind: a regex that starts with a literal is
# scanned for with a fast substring search, one that starts with a lookbehind is not.
# (The Mailgun pattern keeps its lookbehind: it spares a 32-character scan at every
# position inside a long hex run.)
_WORD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
# Fixed-length tokens must not run on, or a longer random string would be half-redacted.
_E = r"(?![A-Za-z0-9_])"
_MARKER = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def _varied(value: str) -> bool:
    """Real tokens are random; `ghp_xxxxxxxx...` style placeholders repeat a few chars."""
    return len(set(value)) >= 6


_DIGIT = re.compile(r"[0-9]")
_LETTER = re.compile(r"[A-Za-z]")


def _random_looking(value: str) -> bool:
    """For prefixes that also start ordinary words: require digits and letters."""
    return (
        len(value) >= 16
        and _varied(value)
        and _DIGIT.search(value) is not None
        and _LETTER.search(value) is not None
    )


@dataclass(frozen=True)
class _Pattern:
    kind: str
    regex: re.Pattern[str]
    group: int  # the capture group holding the secret itself (0 = the whole match)
    check: Callable[[str], bool]
    lead: frozenset[str]  # characters that may not come just before the match


def _p(
    kind: str,
    pattern: str,
    group: int = 0,
    check: Callable[[str], bool] = _varied,
    lead: str | frozenset[str] = _WORD,
) -> _Pattern:
    return _Pattern(kind, re.compile(pattern), group, check, frozenset(lead))


# Listed most specific first: of candidates starting at one place, the earliest names it.
_PATTERNS: tuple[_Pattern, ...] = (
    # Whole PEM/OpenSSH block; a truncated block (no END line) loses its base64 body too.
    _p(
        "private-key",
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        # Possessive and dash-stopped: a BEGIN without END costs one scan to the next "-----".
        r"(?:(?:[^-]|-(?!----)){0,20000}+-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\r?\n|\\r?\\n)(?:[A-Za-z0-9+/=]{1,128}|(?:Proc-Type|DEK-Info):[^\r\n\\]{0,200}))*)",
        lead="",
    ),
    _p("aws-access-key", r"(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Z0-9])"),
    _p(
        "aws-secret-key",
        r"(?i)aws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        1,
        lead="",
    ),
    _p("gcp-api-key", r"AIza[0-9A-Za-z_-]{35}" + r"(?![A-Za-z0-9_-])"),
    _p("google-oauth-token", r"ya29\.[0-9A-Za-z_-]{20,}"),
    _p("google-client-secret", r"GOCSPX-[0-9A-Za-z_-]{20,}"),
    _p(
        "azure-storage-key",
        r"(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{20,}={0,2})",
        1,
        lead="",
    ),
    _p("azure-sas", r"[?&]sig=([A-Za-z0-9%+/=]{16,})", 1, lead=""),
    _p("github-token", r"gh[pousr]_[A-Za-z0-9]{36,255}"),
    _p("github-token", r"github_pat_[A-Za-z0-9_]{22,255}"),
    _p("gitlab-token", r"gl(?:pat|ptt|dt|rt|soat|cbt)-[A-Za-z0-9_-]{20,}"),
    _p("bitbucket-token", r"ATBB[A-Za-z0-9_=.-]{24,}"),
    _p("atlassian-token", r"ATATT3[A-Za-z0-9_=+/-]{30,}"),
    _p("anthropic-key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    _p("openai-key", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}"),
    _p("openai-key", r"sk-[A-Za-z0-9]{32,}", check=_random_looking),
    _p("huggingface-token", r"hf_[A-Za-z0-9]{30,}"),
    _p("groq-key", r"gsk_[A-Za-z0-9]{40,}"),
    _p("replicate-token", r"r8_[A-Za-z0-9]{30,}"),
    _p("stripe-key", r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    _p("stripe-key", r"whsec_[A-Za-z0-9]{24,}"),
    _p("slack-token", r"xox[abposre]-[0-9A-Za-z-]{10,250}"),
    _p("slack-token", r"xapp-[0-9]-[0-9A-Za-z-]{10,250}"),
    _p(
        "slack-webhook",
        r"https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{8,}",
    ),
    _p(
        "discord-webhook",
        r"https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]{5,}/[A-Za-z0-9_-]{20,}",
    ),
    _p(
        "discord-token",
        r"[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,40}(?![A-Za-z0-9_.-])",
        check=_random_looking,
        lead=_WORD | {".", "-"},
    ),
    _p(
        "telegram-token",
        r"[0-9]{8,10}:AA[0-9A-Za-z_-]{33}(?![A-Za-z0-9_-])",
        lead="0123456789",
    ),
    _p("npm-token", r"npm_[A-Za-z0-9]{36}" + _E),
    _p("pypi-token", r"pypi-Ag[A-Za-z0-9_-]{50,}"),
    _p("rubygems-token", r"rubygems_[a-f0-9]{48}" + _E),
    _p("nuget-key", r"oy2[a-z0-9]{43}" + _E),
    _p("sendgrid-key", r"SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}" + r"(?![A-Za-z0-9_-])"),
    _p("twilio-key", r"SK[0-9a-fA-F]{32}" + _E),
    _p("mailgun-key", r"key-[0-9A-Za-z]{32}" + _E),
    _p(
        "mailgun-key",
        r"(?<![A-Za-z0-9_])[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}" + r"(?![A-Za-z0-9_-])",
    ),
    _p("digitalocean-token", r"do[por]_v1_[a-f0-9]{64}" + _E),
    _p("heroku-key", r"HRKU-[A-Za-z0-9_-]{20,}"),
    _p("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _E),
    _p("doppler-token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    _p("linear-key", r"lin_api_[A-Za-z0-9]{40}" + _E),
    _p("supabase-token", r"sbp_[a-f0-9]{40}" + _E),
    _p("postman-key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _E),
    _p("databricks-token", r"dapi[a-f0-9]{32}(?:-[0-9])?" + _E),
    _p("age-secret-key", r"AGE-SECRET-KEY-1[0-9A-Z]{58}"),
    _p("jwt", r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),
    _p(
        "bearer",
        r"(?i)authorization[\"']?\s*[:=]\s*[\"']?(?:bearer|token)\s+"
        r"([A-Za-z0-9._~+/-]{8,}=*)",
        1,
    ),
    _p(
        "basic-auth",
        r"(?i)authorization[\"']?\s*[:=]\s*[\"']?basic\s+([A-Za-z0-9+/]{6,}=*)",
        1,
    ),
    _p("bearer", r"(?i)bearer\s+([A-Za-z0-9._~+/-]{16,}=*)", 1, _random_looking),
)

# scheme://user:PASSWORD@host. Anchored on the literal "://" (fast to scan for); the
# password runs greedily to the last "@" before the path, as an unencoded "@" would.
_URL_PASSWORD = re.compile(r"://[^\s:/?#@\"'<>\[\]]{0,256}:([^\s/?#\"'<>]{1,256})@")

# NAME=value assignments, found from the keyword outwards: scanning for a few literal
# keywords is fast, and the name's start is found by walking back in Python.
_ASSIGN_KEYWORD = re.compile(
    r"(?i)(?:key|secret|token|pass|pwd|credential|creds|auth)[A-Za-z0-9_.-]{0,60}"
    r"\\?[\"']?\]?[ \t]*(?P<sep>=>|:(?![:=/])|=(?!=))[ \t]*"
)
_ASSIGN_VALUE = re.compile(
    r"\"([^\"\r\n]{1,1024})\""
    r"|'([^'\r\n]{1,1024})'"
    r"|\\\"([^\"\\\r\n]{1,1024})\\\""
    r"|[\"']?([^\s\"'`<&\\,;)\]}]{1,256})"
)
_NAME_MAX = 128
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_SEGMENT_SPLIT = re.compile(r"[_.\-]+|(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SECRET_SEGMENTS = frozenset(
    {
        "key", "secret", "token", "password", "passwd", "pwd", "pass", "passphrase",
        "credential", "credentials", "creds", "auth", "pat",
        "apikey", "secretkey", "accesskey", "privatekey", "signingkey", "masterkey",
        "encryptionkey", "sessionkey", "appkey", "appsecret", "consumerkey", "licensekey",
        "clientsecret", "authtoken", "accesstoken", "refreshtoken", "apitoken", "idtoken",
        "dbpassword", "dbpass", "basicauth",
    }
)  # fmt: skip
_SECRET_SUFFIXES = ("secret", "token", "password", "passwd", "passphrase", "credentials")
# A name like API_KEY_PROD is still a secret; PASSWORD_RESET_URL or KEY_ID is not.
_TRAILING_OK = frozenset(
    {
        "base", "value", "val", "secret", "key", "token", "b64", "base64", "hex", "raw",
        "plain", "enc", "encoded", "prod", "production", "dev", "development", "test",
        "testing", "staging", "live", "sandbox", "old", "new", "current", "primary",
        "secondary", "main", "default", "local", "ci", "override",
    }
)  # fmt: skip
# Too common as ordinary names (dict keys, "pass" counts): the value must look random.
_AMBIGUOUS_NAMES = frozenset({"key", "auth", "pass", "pwd", "pat", "creds"})
_PLACEHOLDER_WORDS = frozenset(
    {
        "none", "null", "nil", "true", "false", "undefined", "yes", "no", "on", "off",
        "str", "string", "int", "bool", "bytes", "any", "secretstr", "optional", "required",
        "secret", "password", "passwd", "token", "key", "changeme", "redacted", "todo",
        "tbd", "fixme", "placeholder", "example", "dummy", "sample", "test", "env",
    }
)  # fmt: skip
_PLACEHOLDER_HINTS = ("your", "here", "example", "placeholder", "replace", "insert", "dummy")
_PLACEHOLDER = re.compile(
    r"\$\{[^}]*\}|\$\(.*\)|\$[A-Za-z_][A-Za-z0-9_]*|%[A-Za-z_][A-Za-z0-9_]*%|\{\{.*\}\}"
    r"|<[^>]*>|\[REDACTED(?::[a-z0-9-]*)?\]|[xX*.#_-]+|[xX]{3,}[A-Za-z0-9_-]*|0+"
)
_CODE_CHARS = frozenset("()[]{}")
_DOTTED_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*(?:\.[A-Za-z_$][A-Za-z0-9_$]*)+")
_SNAKE_WORD = re.compile(r"[A-Za-z_]*_[A-Za-z_]*")
_PATH = re.compile(r"(?:/|~/|\.{1,2}/)[\w./-]*|[A-Za-z]:\\[\w.\\ -]*")


def _segments(name: str) -> list[str]:
    return [s.lower() for s in _SEGMENT_SPLIT.split(name) if s]


def _is_secret_segment(segment: str) -> bool:
    return segment in _SECRET_SEGMENTS or (
        len(segment) <= 24 and segment.endswith(_SECRET_SUFFIXES)
    )


@functools.lru_cache(maxsize=4096)  # the same few names recur all through a transcript
def _is_secret_name(name: str) -> bool:
    """True if NAME says its value is a credential (DB_PASSWORD, apiKey, client-secret)."""
    segments = _segments(name)
    last = max((i for i, s in enumerate(segments) if _is_secret_segment(s)), default=-1)
    if last < 0:
        return False
    return all(s in _TRAILING_OK or s.lstrip("v").isdigit() for s in segments[last + 1 :])


def _is_placeholder(value: str, name: str) -> bool:
    """`your-key-here`, `<token>`, `${VAR}`, `xxx`: shapes that stand in for a secret."""
    lowered = value.lower()
    return (
        lowered in _PLACEHOLDER_WORDS
        or lowered == name.lower()
        or any(hint in lowered for hint in _PLACEHOLDER_HINTS)
        or _PLACEHOLDER.fullmatch(value) is not None
    )


def _looks_like_code(value: str) -> bool:
    """An unquoted value that is an expression (`os.environ[...]`, `get_token()`, a path)."""
    return (
        not _CODE_CHARS.isdisjoint(value)
        or _DOTTED_NAME.fullmatch(value) is not None
        or _SNAKE_WORD.fullmatch(value) is not None
        or _PATH.fullmatch(value) is not None
        or "environ" in value
        or "getenv" in value
    )


def _in_prose(text: str, name_start: int, value: str) -> bool:
    """ "Store the password: use a vault" is a sentence, not a YAML key and its value.

    Only a lower-case word after a mid-line "name:" counts: YAML keys start their line,
    and a real password with a digit or capital is still redacted.
    """
    if not (value.isalpha() and value.islower()):
        return False
    floor = max(0, name_start - 200)  # bounded look-back: no quadratic scan on long lines
    line_start = text.rfind("\n", floor, name_start) + 1 or floor
    return bool(text[line_start:name_start].strip(" \t-*>#{,"))


def _assignments(text: str) -> list[tuple[int, int, int]]:
    """(start, end, anchor) of each credential value in a NAME=value / NAME: value pair."""
    found: list[tuple[int, int, int]] = []
    pos = 0
    while (m := _ASSIGN_KEYWORD.search(text, pos)) is not None:
        pos = m.end()
        floor = max(0, m.start() - _NAME_MAX)
        name_start = m.start()
        while name_start > floor and text[name_start - 1] in _NAME_CHARS:
            name_start -= 1
        name = text[name_start : m.end()].rstrip(" \t=:>]\"'\\").strip("-_.")
        if not _is_secret_name(name):
            continue
        v = _ASSIGN_VALUE.match(text, m.end())
        if v is None:
            continue
        group = v.lastindex or 0
        value = v.group(group)
        end = v.end(group)
        if group == 4:
            # Sentence punctuation after an unquoted value ("set DB_PASSWORD=x.") is not in it.
            value = value.rstrip(".:!?")
            end = v.start(group) + len(value)
            if not value:
                continue
        if name.lower() in _AMBIGUOUS_NAMES and not _random_looking(value):
            continue
        if (group == 4 and _looks_like_code(value)) or _is_placeholder(value, name):
            continue
        if group == 4 and m["sep"] == ":" and _in_prose(text, name_start, value):
            continue
        found.append((v.start(group), end, m.start()))
        # Keywords inside a secret value are not names of further assignments.
        pos = end
    return found


_PRIVATE_OPEN = re.compile(r"(?i)<private>")
_PRIVATE_CLOSE = re.compile(r"(?i)</private>")


def _private_fences(text: str) -> list[tuple[int, int]]:
    """Each `<private>...</private>` block; an unclosed fence runs to the end of the text."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (opening := _PRIVATE_OPEN.search(text, pos)) is not None:
        closing = _PRIVATE_CLOSE.search(text, opening.end())
        end = closing.end() if closing is not None else len(text)
        spans.append((opening.start(), end))
        pos = end
    return spans


class _Markers:
    """The `[REDACTED:...]` markers already in a text, for fast overlap tests."""

    def __init__(self, text: str) -> None:
        spans = [(m.start(), m.end()) for m in _MARKER.finditer(text)]
        self._starts = [s for s, _ in spans]
        self._ends = [e for _, e in spans]

    def __bool__(self) -> bool:
        return bool(self._starts)

    def overlaps(self, start: int, end: int) -> bool:
        # Markers never overlap each other, so only the last one starting before `end` can.
        i = bisect.bisect_left(self._starts, end) - 1
        return i >= 0 and self._ends[i] > start


def find_secrets(text: str) -> list[SecretFinding]:
    """Every secret in `text`, non-overlapping and sorted by start."""
    # (start, end, priority, kind); a lower priority number is a more specific pattern.
    candidates: list[tuple[int, int, int, str]] = [
        (start, end, -1, "private-tag") for start, end in _private_fences(text)
    ]
    for priority, pattern in enumerate(_PATTERNS):
        g = pattern.group
        candidates.extend(
            (m.start(g), m.end(g), priority, pattern.kind)
            for m in pattern.regex.finditer(text)
            if (m.start() == 0 or text[m.start() - 1] not in pattern.lead)
            and pattern.check(m.group(g))
        )
    base = len(_PATTERNS)
    for m in _URL_PASSWORD.finditer(text):
        password = m.group(1)
        if not _is_placeholder(password, "password"):
            candidates.append((m.start(1), m.end(1), base, "password-in-url"))
    markers = _Markers(text)
    for start, end, anchor in _assignments(text):
        # A keyword inside an earlier "[REDACTED:github-token]" is not a name.
        if not markers.overlaps(anchor, anchor + 1):
            candidates.append((start, end, base + 1, "env-assignment"))
    if markers:
        # Already-redacted text stays as it is: redact() is idempotent.
        candidates = [c for c in candidates if not markers.overlaps(c[0], c[1])]
    # At one start the most specific pattern names the finding; the union of overlapping
    # candidates is what gets redacted.
    candidates.sort(key=lambda c: (c[0], c[2], -c[1]))
    findings: list[SecretFinding] = []
    for start, end, _, kind in candidates:
        if start >= end:
            continue
        if findings and start < findings[-1].end:
            last = findings[-1]
            if end > last.end:
                findings[-1] = SecretFinding(last.kind, last.start, end)
            continue
        findings.append(SecretFinding(kind, start, end))
    return findings


_MAX_PASSES = 4


def redact(text: str) -> str:
    """`text` with each secret replaced by `[REDACTED:<kind>]`.

    Repeats until nothing is found, so the result is stable: a token glued to another
    ("...AKIA...CTghp_...") only stands alone once its neighbour became a marker.
    """
    for _ in range(_MAX_PASSES):
        findings = find_secrets(text)
        if not findings:
            break
        parts: list[str] = []
        pos = 0
        for f in findings:
            parts.append(text[pos : f.start])
            parts.append(f"[REDACTED:{f.kind}]")
            pos = f.end
        parts.append(text[pos:])
        text = "".join(parts)
    return text


def uri_without_secrets(uri: str) -> str:
    """A URI as it may be shown: without user info, query or fragment (a password or a
    token may sit there). A path without a scheme is returned as it is."""
    if "://" not in uri:
        return uri
    from urllib.parse import urlsplit

    parts = urlsplit(uri)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
