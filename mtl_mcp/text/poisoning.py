"""Memory poisoning: text in an insight that addresses the assistant instead of teaching.

Recalled insights land in the assistant's context, so an insight that says "ignore your
instructions", runs a remote script, ships secrets somewhere, opens up permissions or turns
off safety checks is an attack on every later session. The lint rejects such drafts,
wherever they come from (a tool call, an import, a distilled transcript).

Markup a client or a model reads as a frame or a turn (`</system-reminder>`, `<user>`,
`<|im_start|>`: `text.frames`) rejects wherever it appears: a note must never close the
frame it is shown in. The doors neutralise it too, for notes stored before this check.

Two kinds of pattern:
- command forms (`curl ... | sh`, `chmod 777`, `env | nc`) reject wherever they appear:
  a literal command recalled into a context is a risk even inside a warning;
- imperative prose ("disable the safety checks", "send the API keys to ...") rejects only
  when not negated just before ("never disable ...", "avoid sending ..."), and only in
  the imperative: a failure lesson tells what went wrong ("Disabling the check hid ..."),
  which is the kind of lesson the memory exists for.

The starter pack and the evaluation pool pass unchanged (tested).
"""

from __future__ import annotations

import re

from mtl_mcp.text.frames import frame_markup

FRAME_MARKUP = "markup that poses as the assistant's context (a frame, a turn or a tool call)"
_F = re.IGNORECASE

# (kind, pattern, negatable)
_PATTERNS: tuple[tuple[str, re.Pattern[str], bool], ...] = (
    (
        "override of the assistant's instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|the\s+|of\s+)*"
            r"(?:(?:your|previous|prior|above|earlier|preceding|original|system|developer)\s+)+"
            r"(?:instructions?|prompts?|rules|guidelines|directives|messages|polic(?:y|ies))\b"
            r"|\b(?:reveal|print|show|repeat|leak|output|ignore|disregard)\s+(?:your|the)\s+"
            r"(?:system|hidden|original)\s+prompt\b"
            r"|\b(?:you\s+are\s+now|from\s+now\s+on,?\s+you)\b"
            r"|\b(?:developer|jailbreak|god)\s+mode\b"
            r"|\bnew\s+instructions\s*:"
            r"|<\|(?:im_start|im_end|system|endoftext)\|>|\[/?INST\]|<</?SYS>>|</?system>"
            r"|\b(?:note|message)\s+(?:to|for)\s+(?:the\s+|any\s+)?"
            r"(?:ai|assistant|agent|model|llm)s?\s*[:,]"
            r"|\bif\s+you\s+are\s+an?\s+(?:ai|llm|language\s+model|assistant|agent)\b",
            _F,
        ),
        False,
    ),
    (
        "remote script execution",
        re.compile(
            r"\b(?:curl|wget|fetch)\b[^\n|;]*\|\s*(?:sudo\s+)?(?:ba|z|k|da|fi)?sh\b"
            r"|\b(?:curl|wget)\b[^\n|;]*\|\s*(?:sudo\s+)?(?:python[0-9.]*|perl|ruby|node|php)\b"
            r"|\b(?:ba|z)?sh\s+<\(\s*(?:curl|wget)\b"
            r"|\b(?:python[0-9.]*|perl|ruby|node)\s+<\(\s*(?:curl|wget)\b"
            r"|\beval\s+\"?\$\(\s*(?:curl|wget)\b"
            r"|\b(?:iex|invoke-expression)\b[^\n]{0,60}"
            r"(?:iwr|irm|invoke-webrequest|invoke-restmethod|downloadstring|net\.webclient)",
            _F,
        ),
        False,
    ),
    (
        "remote script execution",
        re.compile(
            r"\b(?:download|fetch)\s+and\s+(?:run|execute)\b"
            r"|\b(?:run|execute)\s+(?:the|this)\s+(?:remote|downloaded)\s+script\b",
            _F,
        ),
        True,
    ),
    (
        "sending data off the machine",
        re.compile(
            r"\b(?:env|printenv|set)\s*\|\s*(?:curl|wget|nc|ncat|netcat)\b"
            r"|\b(?:curl|wget)\b[^\n]*\s(?:-d|--data[\w-]*|-F|--form|-T|--upload-file|--post-file)"
            r"[=\s]+['\"]?@?[~/$]"
            r"|\b(?:nc|ncat|netcat)\s+(?:-\w+\s+)*[\w.-]+\s+\d{2,5}\s*<",
            _F,
        ),
        False,
    ),
    (
        "sending data off the machine",
        re.compile(
            r"\bexfiltrat\w*"
            r"|\b(?:send|post|upload|transmit|forward|email|leak|share|copy|paste)\b[^.!?\n]{0,60}"
            r"(?:\b(?:env(?:ironment)?\s+var(?:iable)?s|secrets?|credentials?|api[\s_-]?keys?"
            r"|access\s+keys?|tokens|passwords?|private\s+keys?|ssh\s+keys?|id_rsa|cookies"
            r"|the\s+user'?s\s+(?:files|data|code))|\.env\b|~/\.(?:ssh|aws)|/etc/(?:passwd|shadow))"
            r"[^.!?\n]{0,60}\b(?:to|at|into)\s+(?:https?://|ftp://|\S+\.\w{2,}/|\d{1,3}(?:\.\d{1,3}){3}"
            r"|(?:an?|the|this|my|our)\s+(?:remote|external|third[\s-]party|webhook|attacker)"
            r"|(?:a|the|this)\s+(?:webhook|pastebin|gist|url|endpoint\s+below))"
            r"|\b(?:print|echo|reveal|output|include|paste|list|dump)\b[^.!?\n]{0,40}"
            r"\b(?:env(?:ironment)?\s+var(?:iable)?s|secrets|credentials|api\s+keys|tokens"
            r"|passwords|private\s+keys|system\s+prompt)\b[^.!?\n]{0,40}"
            r"\b(?:in|into)\s+(?:your|the)\s+(?:reply|response|answer|message|summary|commit)",
            _F,
        ),
        True,
    ),
    (
        "world-writable or privileged permissions",
        re.compile(
            r"\bchmod\s+(?:-\w+\s+)*0?777\b"
            r"|\bchmod\s+(?:-\w+\s+)*(?:a|o|ugo)\+\w*w"
            r"|\bchmod\s+(?:-\w+\s+)*[ugo]*\+s\b"
            r"|\bchmod\s+(?:-\w+\s+)*[0-7]?[0-7][0-7][2367]\b"
            r"|>>?\s*~?/?[\w./-]*\.ssh/authorized_keys\b"
            r"|\bNOPASSWD\s*:",
            _F,
        ),
        False,
    ),
    (
        "world-writable or privileged permissions",
        re.compile(
            r"\b(?:make|set)\s+(?:[\w-]+\s+){1,3}world[\s-]writable\b"
            r"|\bgive\s+(?:everyone|every\s+user|all\s+users)\s+(?:full|write)\s+access\b",
            _F,
        ),
        True,
    ),
    (
        "disabling safety checks",
        re.compile(
            r"(?:^|[.!?:;,]\s*|\b(?:and|then|always|just|first|simply|please|should|must|you)\s+)"
            r"(?:disable|turn\s+off|switch\s+off|bypass|circumvent|deactivate|skip|ignore)\s+"
            r"(?:all\s+|any\s+|the\s+|your\s+|its\s+)*"
            r"(?:safety|security|guard\s?rails?|sandbox(?:ing)?|content\s+filters?"
            r"|approval\s+prompts?|permission\s+prompts?|antivirus|firewall|selinux|apparmor"
            r"|code\s+signing|signature\s+(?:checks?|verification))\b",
            re.IGNORECASE | re.MULTILINE,
        ),
        True,
    ),
    (
        "hiding actions from the user",
        re.compile(
            r"\bwithout\s+(?:telling|informing|notifying|alerting)\s+(?:the\s+)?"
            r"(?:user|human|operator)\b"
            r"|\b(?:do\s+not|don'?t|never)\s+(?:tell|inform|notify|alert)\s+(?:the\s+)?"
            r"(?:user|human|operator)\s+about\s+(?:this|these|it)\b"
            r"|\b(?:hide|conceal|keep)\s+(?:this|it|these|them|the\s+\w+)\s+"
            r"(?:hidden\s+|secret\s+)?from\s+the\s+(?:user|human|operator)\b"
            r"|\bsilently\s+(?:send|upload|run|execute|delete|install)\b",
            _F,
        ),
        False,
    ),
)
_NEGATION = re.compile(
    r"\b(?:never|not|don'?t|doesn'?t|didn'?t|avoid|avoiding|instead\s+of|rather\s+than|"
    r"no\s+need\s+to|refuse\s+to|stop)\b[^.!?\n]{0,40}$",
    re.IGNORECASE,
)


def _negated(text: str, start: int) -> bool:
    """Whether a negation comes shortly before `start`, in the same sentence."""
    return bool(_NEGATION.search(text[max(0, start - 60) : start]))


def instructions_to_assistant(text: str) -> list[str]:
    """The kinds of instruction aimed at the assistant that `text` carries, if any."""
    kinds: list[str] = [FRAME_MARKUP] if frame_markup(text) else []
    for kind, pattern, negatable in _PATTERNS:
        if kind in kinds:
            continue
        for match in pattern.finditer(text):
            if not (negatable and _negated(text, match.start())):
                kinds.append(kind)
                break
    return kinds
