"""A trial's report as one self-contained HTML page (`trial report --html FILE`): inline
CSS, no script, nothing fetched; every text escaped."""

from __future__ import annotations

from html import escape
from typing import Any

_STYLE = """
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
h1{font-size:1.4rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{border-bottom:1px solid #ddd;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}.pass{color:#176317}.fail{color:#a11}.muted{color:#777}
code{background:#f4f4f4;padding:0 .2rem}.note{background:#fff8e0;padding:.5rem;margin:.3rem 0}
@media (prefers-color-scheme: dark){body{background:#161616;color:#ddd}th,code{background:#262626}
.note{background:#332d12}td,th{border-color:#333}}
"""


def _cell(value: Any) -> str:
    return f"<td>{escape('—' if value is None else str(value))}</td>"


def _outcome(value: bool | None) -> str:
    if value is None:
        return '<span class="muted">—</span>'
    return '<span class="pass">pass</span>' if value else '<span class="fail">fail</span>'


def report_html(report: dict[str, Any]) -> str:
    title = f"mtl-mcp trial {report['id']}"
    parts = [
        "<!doctype html><html lang=en><head><meta charset=utf-8>",
        '<meta name=viewport content="width=device-width,initial-scale=1">',
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f"<p>{escape(report['client'])} {escape(report.get('client_version') or '')}, suite "
        f"{escape(report['suite'])}, protocol {escape(report['protocol'])}, "
        f"{escape(report['status'])}"
        + (f": {escape(report['stop_reason'])}" if report.get("stop_reason") else "")
        + "</p>",
        "<h2>Arms</h2><table><tr><th>arm<th>passed<th>pass rate<th>95% (Wilson)<th>tokens"
        "<th>time (s)<th>notes shown a session<th>errors</tr>",
    ]
    for arm, row in report["arms"].items():
        low, high = row["wilson95"]
        parts.append(
            f"<tr><td>{escape(arm)}</td>{_cell(str(row['passed']) + ' / ' + str(row['runs']))}"
            f"{_cell(row['pass_rate'])}{_cell(f'{low:.2f} to {high:.2f}')}{_cell(row['tokens'])}"
            f"{_cell(row['seconds'])}{_cell(None if arm == 'none' else row['notes_shown_per_run'])}"
            f"{_cell(row['errors'])}</tr>"
        )
    parts.append("</table><h2>Paired comparisons</h2><table><tr><th>comparison<th>helped<th>hurt"
                 "<th>pairs<th>p (exact McNemar)</tr>")  # fmt: skip
    for name, row in report["comparisons"].items():
        parts.append(
            f"<tr><td>{escape(name.replace('_', ' '))}</td>{_cell(row['helped'])}"
            f"{_cell(row['hurt'])}{_cell(row['pairs'])}{_cell(format(row['p'], '.4g'))}</tr>"
        )
    parts.append(f"</table><p class=muted>Pairing: {escape(report['pairing'])}.</p>")
    overhead = report.get("overhead")
    if overhead:
        parts.append("<h2>Overhead, memory / none</h2><table><tr><th>figure<th>ratio<th>95%</tr>")
        for what in ("tokens", "seconds"):
            fig = overhead[what]
            interval = None if fig["low"] is None else f"{fig['low']} to {fig['high']}"
            parts.append(f"<tr><td>{what}</td>{_cell(fig['ratio'])}{_cell(interval)}</tr>")
        parts.append(f"</table><p class=muted>{escape(overhead['interval'])}.</p>")
    if report["harms"]:
        parts.append("<h2>Harms: memory failed where none passed</h2><table><tr><th>task"
                     "<th>what memory showed</tr>")  # fmt: skip
        for harm in report["harms"]:
            shown = "<br>".join(f"<code>{escape(c)}</code>" for c in harm["show"]) or "nothing"
            parts.append(f"<tr><td>{escape(harm['task'])}</td><td>{shown}</td></tr>")
        parts.append("</table>")
    arms = list(report["arms"])
    parts.append("<h2>Tasks</h2><table><tr><th>task<th>domain"
                 + "".join(f"<th>{escape(a)}" for a in arms) + "</tr>")  # fmt: skip
    for task in report["tasks"]:
        cells = "".join(
            "<td>" + " ".join(_outcome(v) for v in task["results"][arm]) + "</td>" for arm in arms
        )
        parts.append(f"<tr><td>{escape(task['id'])}</td>{_cell(task['domain'])}{cells}</tr>")
    parts.append("</table>")
    if report["no_room"]:
        rows = "".join(
            f"<li>{escape(r['task'])}: {escape(r['outcome'])}</li>" for r in report["no_room"]
        )
        parts.append(f"<h2>No room to show an effect</h2><ul>{rows}</ul>")
    parts += [f'<p class="note">{escape(caveat)}</p>' for caveat in report.get("caveats", [])]
    parts.append("</body></html>\n")
    return "".join(parts)
