"""What the model reads from `recall_insights` and `list_memories`, in each possible shape.

    python bench/tool_output.py [--out bench-results/tool_output.json]

Claude Code hands the model only `JSON.stringify(structuredContent)` when a tool result has
structured content, and the text content otherwise. For the starter pack, the benchmark's
3-sentence plans (k=3) and a default `list_memories` page (20 insights), this prints the
characters and estimated tokens (`mtl_mcp.text.tokens`, deliberately high) of:

- `full JSON`: the structured content mtl-mcp returned before (every field of every insight,
  no framing), which is what Claude Code showed the model;
- `text only`: the framed notes alone (no structured content: ids and scores only as text);
- `notes + ids`: what mtl-mcp returns now, the notes plus ids (and scores) as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from benchmark import PLANS, ROOT  # the same plans as the main benchmark
from mcp.client import Client

from mtl_mcp import Memory
from mtl_mcp.config import load_settings
from mtl_mcp.server.app import build_server
from mtl_mcp.text.tokens import estimate_tokens


def as_claude_code_shows(structured: Any) -> str:
    """`JSON.stringify`: compact, non-ASCII characters kept as they are."""
    return json.dumps(structured, separators=(",", ":"), ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """Models inside plain containers, dumped as MCPServer dumps a tool's return value."""
    return json.loads(json.dumps(value, default=lambda m: m.model_dump(mode="json")))


def cost(text: str) -> dict[str, int]:
    return {"chars": len(text), "tokens": estimate_tokens(text)}


async def measure(memory: Memory) -> dict[str, dict[str, dict[str, float]]]:
    shapes: dict[str, dict[str, list[dict[str, int]]]] = {"recall": {}, "list": {}}

    def add(tool: str, shape: str, text: str) -> None:
        shapes[tool].setdefault(shape, []).append(cost(text))

    async with Client(build_server(memory.settings, memory)) as client:
        for plan in PLANS:
            result = await client.call_tool("recall_insights", {"plan": plan, "k": 3})
            notes = result.structured_content["notes"]
            hits = memory.recall(plan, k=3)  # the same hits: recall is deterministic
            before = {
                "plan": plan,
                "project": None,
                "results": [h.model_dump(mode="json") for h in hits],
            }
            add("recall", "full JSON", as_claude_code_shows(before))
            add("recall", "text only", notes)
            add("recall", "notes + ids", as_claude_code_shows(result.structured_content))
        page = await client.call_tool("list_memories", {})
        items, total = memory.list(limit=20)
        before_page = {"total": total, "offset": 0, "limit": 20, "items": items}
        add("list", "full JSON", as_claude_code_shows(jsonable(before_page)))
        add("list", "text only", page.structured_content["notes"])
        add("list", "notes + ids", as_claude_code_shows(page.structured_content))
    return {
        tool: {
            shape: {key: statistics.median(s[key] for s in samples) for key in ("chars", "tokens")}
            for shape, samples in by_shape.items()
        }
        for tool, by_shape in shapes.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench-results" / "tool_output.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        memory = Memory(load_settings(Path(work), starter=True))
        try:
            results = anyio.run(measure, memory)
        finally:
            memory.close()
    for tool, by_shape in results.items():
        for shape, figures in by_shape.items():
            print(
                f"{tool:7} {shape:12} {figures['chars']:7.0f} chars {figures['tokens']:6.0f} tokens"
            )
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"-> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
