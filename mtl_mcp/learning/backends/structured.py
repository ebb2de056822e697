"""Structured output for backends that hand back JSON rather than a parsed model.

The command-line backends and MCP sampling all ask for the same pydantic models the API
backend gets: `strict_schema` writes a model's JSON schema in the strict form structured-
output APIs accept (Claude Code validates the model's answer against it, Codex passes it to
the Responses API), and `parse_answer` checks what came back. An answer that does not fit
is `UnusableOutput`, as with the API backend.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from mtl_mcp.errors import UnusableOutput
from mtl_mcp.learning.backends import Answer
from mtl_mcp.schemas import validation_problems
from mtl_mcp.untrusted import json_loads

_DROPPED_KEYWORDS = ("title", "default")


def strict_schema(answer: type[BaseModel]) -> dict[str, Any]:
    """`answer`'s JSON schema with its `$ref`s inlined, every object closed
    (`additionalProperties: false`) with every property required, and no titles or defaults:
    the subset strict structured-output modes accept."""
    schema = answer.model_json_schema()
    definitions = schema.pop("$defs", {})

    def rewrite(node: Any) -> Any:
        if isinstance(node, list):
            return [rewrite(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return rewrite(definitions[node["$ref"].rsplit("/", 1)[-1]])
        out = {k: rewrite(v) for k, v in node.items() if k not in _DROPPED_KEYWORDS}
        if out.get("type") == "object" and "properties" in out:
            out["properties"] = {name: rewrite(v) for name, v in node["properties"].items()}
            out["required"] = list(out["properties"])
            out["additionalProperties"] = False
        return out

    result: dict[str, Any] = rewrite(schema)
    return result


def json_object(text: str) -> dict[str, Any] | None:
    """`text` decoded as a JSON object, or None if it is not one."""
    try:
        data = json_loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def json_in_text(text: str) -> Any:
    """The JSON object in a model's text answer: the whole text, else the span from its first
    `{` to its last `}` (models wrap JSON in code fences or a sentence). ValueError if none."""
    try:
        return json_loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("no JSON object in the answer") from None
        return json_loads(text[start : end + 1])


def unusable(step: str, why: str, fix: str) -> UnusableOutput:
    """The error for an answer that does not fit the requested shape."""
    return UnusableOutput(
        f"the model returned unusable output at the {step} step ({why}); not retried, as "
        f"the same input would most likely fail the same way: {fix}"
    )


def problems(exc: ValidationError) -> str:
    """The first two things wrong with an answer, for `unusable`."""
    return "; ".join(validation_problems(exc, "output")[:2])


def parse_answer(data: Any, answer: type[Answer], *, step: str, fix: str) -> Answer:
    """`data` (decoded JSON) as `answer`, or UnusableOutput naming the step and `fix`."""
    try:
        return answer.model_validate(data)
    except ValidationError as exc:
        raise unusable(step, problems(exc), fix) from exc


_FENCE = re.compile(
    r"```[ \t]*(?:json[5c]?|javascript|js)?[ \t]*\r?\n?(.*?)(?:```|\Z)", re.I | re.S
)
_WORDS = {"true": "true", "false": "false", "null": "null", "True": "true", "False": "false"}
_WORDS |= {"None": "null", "none": "null"}
_VALUE_END = frozenset('"}]') | frozenset("0123456789el")  # e.g. 2, true, null, false


def loose_json(text: str) -> tuple[Any, bool]:
    """The JSON value in a model's answer, and whether it had to be dug out or mended.

    Tries, in order: the text as it is; each fenced block; the text from its first `{`.
    Each is parsed as it is, then mended (`mend`) if it is almost JSON. ValueError (saying
    what the first parse error was) if none of them yields a JSON object or array.
    """
    stripped = text.strip()
    try:
        return json_loads(stripped), False
    except json.JSONDecodeError as exc:
        first_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except ValueError as exc:  # nested too deeply
        first_error = str(exc)
    candidates = [m.group(1) for m in _FENCE.finditer(stripped)]
    start = min((i for i in (stripped.find("{"), stripped.find("[")) if i >= 0), default=-1)
    if start >= 0:
        candidates.append(stripped[start:])
    for candidate in candidates:
        for attempt in (candidate.strip(), mend(candidate)):
            try:
                data = json_loads(attempt)
            except ValueError:
                continue
            if isinstance(data, dict | list):
                return data, True
    raise ValueError(f"the answer is not JSON ({first_error})")


def mend(text: str) -> str:
    """Almost-JSON from a model made into JSON where the intent is plain: from the first `{`
    or `[` to where it closes (prose after is dropped), single-quoted strings, raw newlines
    in strings, trailing or missing commas between values, `//`, `/* */` and `#` comments,
    Python's True/False/None, unquoted keys and words, and an answer cut off mid-way (open
    strings and brackets are closed, a dangling key gets null)."""
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        return text
    out: list[str] = []
    closers: list[str] = []
    keyed: list[bool] = []  # per open bracket: an object's current key has had its colon
    i, n = min(starts), len(text)
    quote: str | None = None  # the quote of the string being read

    def last() -> str:  # the last character written that is not white space
        return next((piece.rstrip()[-1] for piece in reversed(out) if piece.strip()), "")

    def drop_trailing_comma() -> None:
        while out and (out[-1].isspace() or out[-1] == ","):
            if out.pop() == "," and keyed:
                keyed[-1] = True  # what came before the comma was complete

    def value_starts() -> None:  # a missing comma between two values
        if closers and last() in _VALUE_END:
            out.append(",")
            keyed[-1] = False

    def close_key() -> None:  # an object ends after a key: give it a value
        if closers and closers[-1] == "}" and not keyed[-1] and last() == '"':
            out.append(":null")

    while i < n:
        c = text[i]
        if quote is not None:
            if c == "\\" and i + 1 < n:
                nxt = text[i + 1]
                out.append("'" if nxt == "'" else c + nxt)
                i += 2
                continue
            if c == quote:
                out.append('"')
                quote = None
            else:
                out.append({'"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, c))
            i += 1
            continue
        if c in "\"'":
            value_starts()
            quote = c
            out.append('"')
        elif c in "{[":
            value_starts()
            closers.append("}" if c == "{" else "]")
            keyed.append(False)
            out.append(c)
        elif c in "}]":
            drop_trailing_comma()
            if last() == ":":
                out.append("null")
            close_key()
            if closers:
                out.append(closers.pop())
                keyed.pop()
            if not closers:
                break
        elif (c == "/" and text.startswith("//", i)) or c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c == "/" and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (text[j].isalnum() or text[j] in "_-"):
                j += 1
            word = text[i:j]
            value_starts()
            out.append(_WORDS.get(word) or json.dumps(word))
            i = j
            continue
        elif c.isdigit() or c == "-":
            value_starts()
            j = i + 1
            while j < n and (text[j].isdigit() or text[j] in ".eE+-"):
                j += 1
            out.append(text[i:j])
            i = j
            continue
        else:
            if closers and c in ":,":
                keyed[-1] = c == ":"
            out.append(c)
        i += 1
    if quote is not None:  # cut off inside a string
        out.append('"')
    drop_trailing_comma()
    if last() == ":":
        out.append("null")
    while closers:
        close_key()
        out.append(closers.pop())
        keyed.pop()
    return "".join(out)
