"""Structured output for backends that hand back JSON rather than a parsed model.

The command-line backends and MCP sampling all ask for the same pydantic models the API
backend gets: `strict_schema` writes a model's JSON schema in the strict form structured-
output APIs accept (Claude Code validates the model's answer against it, Codex passes it to
the Responses API), and `parse_answer` checks what came back. An answer that does not fit
is `UnusableOutput`, as with the API backend.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from mtl_mcp.errors import UnusableOutput
from mtl_mcp.learning.backends import Answer
from mtl_mcp.schemas import validation_problems

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
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def json_in_text(text: str) -> Any:
    """The JSON object in a model's text answer: the whole text, else the span from its first
    `{` to its last `}` (models wrap JSON in code fences or a sentence). ValueError if none."""
    try:
        return json.loads(text)
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end <= start:
            raise ValueError("no JSON object in the answer") from None
        return json.loads(text[start : end + 1])


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
