"""A 2-D map of the memory: PCA of the insight embeddings, coloured by domain or category.

The HTML is one self-contained file (inline SVG, a few lines of JavaScript for the hover card,
no network), so it needs no plotting library. PNG output uses matplotlib, an optional extra.
"""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from mtl_mcp.errors import InputError

if TYPE_CHECKING:
    from mtl_mcp.memory import Memory

ColorBy = Literal["domain", "category"]
PALETTE = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#ad494a",
]  # fmt: skip
OTHER_COLOR = "#b0b0b0"
SIZE = 640
MARGIN = 24
PNG_HINT = (
    "PNG output needs matplotlib: install it with `pip install 'mtl-mcp[map]'`, "
    "or write HTML instead (--out map.html), which needs nothing extra"
)


class MapPoint(BaseModel):
    """One insight on the map."""

    id: str
    title: str
    description: str
    content: str
    domain: str | None
    category: str
    polarity: str
    x: float
    y: float


def project_2d(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    """The first two principal components, from the 384 x 384 covariance's eigenvectors."""
    if len(vectors) == 0:
        return np.zeros((0, 2))
    centred = vectors.astype(np.float64) - vectors.mean(axis=0)
    if len(vectors) == 1:
        return np.zeros((1, 2))
    _, basis = np.linalg.eigh(centred.T @ centred)
    axes = basis[:, ::-1][:, :2]
    # A fixed sign per axis, so the same memory always draws the same way round.
    axes *= np.where(axes[np.abs(axes).argmax(axis=0), [0, 1]] < 0, -1.0, 1.0)
    projected: npt.NDArray[np.float64] = centred @ axes
    return projected


def map_points(memory: Memory) -> list[MapPoint]:
    """Every active insight of the memory, projected."""
    labelled = memory.vectors()
    xy = project_2d(labelled.vectors)
    return [
        MapPoint.model_validate({**r, "x": float(x), "y": float(y)})
        for r, (x, y) in zip(labelled.records, xy, strict=True)
    ]


def colours(labels: Sequence[str]) -> dict[str, str]:
    """The commonest labels get the palette's colours; the rest share grey."""
    ranked = [label for label, _ in Counter(labels).most_common()]
    return {
        label: PALETTE[n] if n < len(PALETTE) else OTHER_COLOR for n, label in enumerate(ranked)
    }


def _label(point: MapPoint, color_by: ColorBy) -> str:
    return (point.domain or "(no domain)") if color_by == "domain" else point.category


def _scale(points: Sequence[MapPoint]) -> list[tuple[float, float]]:
    xs = [p.x for p in points] or [0.0]
    ys = [p.y for p in points] or [0.0]
    span = max(max(xs) - min(xs), max(ys) - min(ys)) or 1.0
    inner = SIZE - 2 * MARGIN
    return [
        (MARGIN + (p.x - min(xs)) / span * inner, MARGIN + (max(ys) - p.y) / span * inner)
        for p in points
    ]


_SCRIPT = """
const card = document.getElementById("card");
const data = JSON.parse(document.getElementById("insights").textContent);
document.querySelectorAll("circle[data-i]").forEach((dot) => {
  dot.addEventListener("mouseenter", (event) => {
    const d = data[Number(dot.dataset.i)];
    card.replaceChildren();
    const facts = [d.domain, d.category, d.polarity, d.id].join(" \\u00b7 ");
    for (const [tag, text] of [["b", d.title], ["i", d.description], ["p", d.content],
        ["small", facts]]) {
      const el = document.createElement(tag); el.textContent = text; card.appendChild(el);
    }
    card.style.display = "block";
    card.style.left = (event.pageX + 12) + "px"; card.style.top = (event.pageY + 12) + "px";
  });
  dot.addEventListener("mouseleave", () => { card.style.display = "none"; });
});
"""


def render_html(points: Sequence[MapPoint], color_by: ColorBy = "domain") -> str:
    """A self-contained page: the scatter plot, a legend and a hover card per insight."""
    labels = [_label(p, color_by) for p in points]
    palette = colours(labels)
    dots = []
    for n, ((x, y), point, label) in enumerate(zip(_scale(points), points, labels, strict=True)):
        tip = html.escape(f"{point.title} ({label})")
        dots.append(
            f'<circle data-i="{n}" data-id="{html.escape(point.id)}" cx="{x:.1f}" cy="{y:.1f}" '
            f'r="5" fill="{palette[label]}"><title>{tip}</title></circle>'
        )
    legend = "".join(
        f'<li><span style="background:{colour}"></span>{html.escape(label)} '
        f"({labels.count(label)})</li>"
        for label, colour in palette.items()
    )
    payload = json.dumps(
        [{**p.model_dump(), "domain": p.domain or "(no domain)"} for p in points],
        ensure_ascii=False,
    ).replace("</", "<\\/")  # a title containing "</script>" must not end the block
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>mtl-mcp memory map ({len(points)} insights, by {color_by})</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; color: #222; }}
main {{ display: flex; gap: 24px; align-items: flex-start; }}
svg {{ border: 1px solid #ddd; background: #fff; }}
circle {{ stroke: #fff; stroke-width: 1; opacity: .85; }} circle:hover {{ stroke: #000; }}
ul {{ list-style: none; padding: 0; }} li {{ margin: 2px 0; }}
li span {{ display: inline-block; width: 12px; height: 12px; margin-right: 6px; }}
#card {{ display: none; position: absolute; max-width: 360px; background: #fffbe6;
  border: 1px solid #ccc; padding: 8px; box-shadow: 0 2px 6px rgba(0,0,0,.2); }}
#card b, #card i, #card small {{ display: block; margin-bottom: 4px; }} #card p {{ margin: 4px 0; }}
</style></head><body>
<h1>Memory map</h1>
<p>{len(points)} insights, the first two principal components of their embeddings, coloured by
{color_by}. Domains that overlap mean lessons that transfer; a tight island is a domain whose
lessons mostly talk about their own stack. Hover a dot to read it.</p>
<main>
<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}" \
viewBox="0 0 {SIZE} {SIZE}">
{"".join(dots)}
</svg>
<ul>{legend}</ul>
</main>
<div id="card"></div>
<script type="application/json" id="insights">{payload}</script>
<script>{_SCRIPT}</script>
</body></html>
"""


def render_png(points: Sequence[MapPoint], path: Path, color_by: ColorBy = "domain") -> None:
    """The same map as a PNG (needs matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise InputError(PNG_HINT) from exc
    labels = [_label(p, color_by) for p in points]
    palette = colours(labels)
    figure, axes = plt.subplots(figsize=(9, 7), dpi=120)
    for label, colour in palette.items():
        chosen = [p for p, lab in zip(points, labels, strict=True) if lab == label]
        axes.scatter([p.x for p in chosen], [p.y for p in chosen], s=18, c=colour, label=label)
    axes.set_title(f"mtl-mcp memory map: {len(points)} insights by {color_by}")
    axes.set_xticks([])
    axes.set_yticks([])
    axes.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)


def write_map(points: Sequence[MapPoint], out: Path, color_by: ColorBy = "domain") -> None:
    """Write HTML or PNG, by the file's extension."""
    suffix = out.suffix.lower()
    if suffix in (".html", ".htm"):
        out.write_text(render_html(points, color_by), encoding="utf-8")
    elif suffix == ".png":
        render_png(points, out, color_by)
    else:
        raise InputError(f"{out.name}: write the map to a .html file (or .png with matplotlib)")
