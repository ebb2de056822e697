"""Edit a JSON (or JSONC: comments, trailing commas) file as text, keeping its layout.

`edited_text(text, old, new)` turns the file holding `old` into one holding `new` by changing
only the spans that differ: a member or element that went is cut out with its comma, one that
came is inserted after the last one in the file's own indentation, a value that changed is
replaced. So comments and formatting survive, and an install followed by an uninstall gives
the file back byte for byte. The caller checks the result parses to `new` (see json_configs).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_SPACE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
# What may follow an entry on its line: a comma, a comment (group 2), blanks.
_LINE_TAIL = re.compile(r"[ \t]*(,?)([ \t]*(?://[^\n]*|/\*[^\n]*?\*/)?[ \t]*)")


class JsoncError(ValueError):
    """Not JSON with comments either; `offset` is where the parser stopped."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass
class _Node:
    start: int
    end: int
    # an object's members (key, key start, value) or an array's items (None, start, value)
    entries: list[tuple[str | None, int, _Node]] = field(default_factory=list)
    kind: str = "scalar"  # "object", "array" or "scalar"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip(self) -> None:
        match = _SPACE.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos

    def value(self) -> _Node:
        self.skip()
        start, char = self.pos, self.text[self.pos : self.pos + 1]
        if char in ("{", "["):
            return self.container(char)
        match = _STRING.match(self.text, start) if char == '"' else _NUMBER.match(self.text, start)
        if match is None:
            for word in ("true", "false", "null"):
                if self.text.startswith(word, start):
                    self.pos = start + len(word)
                    return _Node(start, self.pos)
            raise JsoncError("expected a value", start)
        self.pos = match.end()
        return _Node(start, self.pos)

    def container(self, opening: str) -> _Node:
        closing = "}" if opening == "{" else "]"
        node = _Node(self.pos, -1, kind="object" if opening == "{" else "array")
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith(closing, self.pos):
                self.pos += 1
                node.end = self.pos
                return node
            start = self.pos
            key = None
            if opening == "{":
                match = _STRING.match(self.text, self.pos)
                if match is None:
                    raise JsoncError("expected a member name in quotes", self.pos)
                key = json.loads(match.group())
                self.pos = match.end()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise JsoncError("expected ':'", self.pos)
                self.pos += 1
            node.entries.append((key, start, self.value()))
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith(closing, self.pos):
                raise JsoncError(f"expected ',' or '{closing}'", self.pos)


def _tree(text: str) -> _Node:
    parser = _Parser(text)
    node = parser.value()
    parser.skip()
    if parser.pos != len(text):
        raise JsoncError("unexpected text after the value", parser.pos)
    return node


def parse(text: str) -> Any:
    """The value of a JSON or JSONC text; JsoncError if it is neither."""
    _tree(text)  # the syntax, with comments and trailing commas
    return json.loads(_strip(text))


def _strip(text: str) -> str:
    """`text` without comments and trailing commas (strings left alone). The comma's
    lookahead takes each comment whole (an atomic group): backtracking into one would find a
    } or ] inside it, or run a /* on to a later comment's */, and drop a comma that is needed."""
    out: list[str] = []
    pos = 0
    for match in re.finditer(
        r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|,(?=(?>\s+|//[^\n]*|/\*.*?\*/)*[}\]])', text, re.S
    ):
        out.append(text[pos : match.start()])
        out.append(match.group() if match.group().startswith('"') else "")
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def _strip_strings(text: str) -> str:
    """`text` with its string literals emptied: what is left of it is syntax and comments."""
    return _STRING.sub('""', text)


def edited_text(text: str, old: Any, new: Any) -> str:
    """`text` (which holds `old`) changed to hold `new`, touching only what differs. A file
    whose lines all end in CRLF is edited as LF and given back in CRLF, so that the lines
    added end as its own do."""
    if "\r\n" in text and "\n" not in text.replace("\r\n", ""):
        return _edited(text.replace("\r\n", "\n"), old, new).replace("\n", "\r\n")
    return _edited(text, old, new)


def _edited(text: str, old: Any, new: Any) -> str:
    edits: list[tuple[int, int, str]] = []
    _Differ(text, edits, _indent_unit(text)).diff(_tree(text), old, new)
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _indent_unit(text: str) -> str:
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "


@dataclass
class _Differ:
    text: str
    edits: list[tuple[int, int, str]]
    unit: str

    def diff(self, node: _Node, old: Any, new: Any) -> None:
        if old == new and type(old) is type(new):
            return
        if node.kind == "object" and isinstance(old, dict) and isinstance(new, dict):
            self.object(node, old, new)
        elif node.kind == "array" and isinstance(old, list) and isinstance(new, list):
            self.array(node, old, new)
        else:
            self.edits.append((node.start, node.end, self.render(new, self.line_indent(node))))

    def object(self, node: _Node, old: dict[str, Any], new: dict[str, Any]) -> None:
        gone = [i for i, (key, _, _) in enumerate(node.entries) if key not in new]
        for key, _, value in node.entries:
            if key in new and key in old:
                self.diff(value, old[key], new[key])
        added = [f"{json.dumps(k, ensure_ascii=False)}: " for k in new if k not in old]
        values = [new[k] for k in new if k not in old]
        self.change(node, gone, [(len(node.entries) - 1, added, values)])

    def array(self, node: _Node, old: list[Any], new: list[Any]) -> None:
        keys = [json.dumps(item, sort_keys=True) for item in old]
        matcher = difflib.SequenceMatcher(a=keys, b=[json.dumps(i, sort_keys=True) for i in new])
        gone: list[int] = []
        inserts: list[tuple[int, list[str], list[Any]]] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "replace" and i2 - i1 == j2 - j1:
                for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                    self.diff(node.entries[i][2], old[i], new[j])
                continue
            if tag in ("delete", "replace"):
                gone += range(i1, i2)
            if tag in ("insert", "replace"):
                inserts.append((i2 - 1, [""] * (j2 - j1), new[j1:j2]))
        self.change(node, gone, inserts)

    def change(
        self, node: _Node, gone: list[int], inserts: list[tuple[int, list[str], list[Any]]]
    ) -> None:
        """Cut entries `gone` out of `node` with their commas, and insert entries after the
        entry each insert names (-1: before the first), in the container's own layout.
        An entry is given as a prefix ('"key": ' for a member, "" for an item) and a value.
        Each way of inserting has its exact inverse among the ways of cutting, so that an
        install followed by an uninstall gives back every byte."""
        entries = node.entries
        inserts = [(after, t, v) for after, t, v in inserts if v]
        kept = [i for i in range(len(entries)) if i not in gone]
        multiline = "\n" in self.text[node.start : node.end] or not entries
        if entries and multiline:
            indent = self.line_indent(entries[0][2], entries[0][1])
        else:
            indent = self.line_indent(node) + self.unit if multiline else ""
        gap = ",\n" + indent if multiline else ", "

        def rendered(prefixes: list[str], values: list[Any]) -> list[str]:
            inner = indent if multiline else None
            return [p + self.render(v, inner) for p, v in zip(prefixes, values, strict=True)]

        if multiline and self.by_line(entries, gone, inserts, indent, rendered):
            return
        if not entries:  # into an empty container: after its `{`, its comments kept below
            body = [text for _, t, v in inserts for text in rendered(t, v)]
            closing = "\n" + self.line_indent(node)
            self.edits.append(
                (node.start + 1, node.start + 1, "\n" + indent + gap.join(body) + closing)
            )
            return
        if not kept and not inserts:
            self.edits.append(self.cut_all(node))
            return
        if not kept:  # nothing of the old content stays: the interior is rewritten
            body = [text for _, t, v in inserts for text in rendered(t, v)]
            interior = gap.join(body)
            if multiline and body:
                interior = "\n" + indent + interior + "\n" + self.line_indent(node)
            self.edits.append((node.start + 1, node.end - 1, interior))
            return
        self.cut(entries, gone, kept)
        for after, prefixes, values in inserts:
            texts = rendered(prefixes, values)
            before_kept = [i for i in kept if i <= after]
            if before_kept:
                at = entries[before_kept[-1]][2].end
                self.edits.append((at, at, gap + gap.join(texts)))
            else:
                at = entries[kept[0]][1]
                self.edits.append((at, at, gap.join(texts) + gap))

    def cut_all(self, node: _Node) -> tuple[int, int, str]:
        """The edit that empties `node`: the exact inverse of an insert into it when empty
        (what follows its `{` is ours, up to the line its `}` or its comments start on);
        otherwise every entry and comma goes, and its comments stay."""
        entries = node.entries
        first, last = entries[0][1], entries[-1][2].end
        closing = "\n" + self.line_indent(node)
        opening = self.text[node.start + 1 : first]
        between = self.text[first:last]
        if (
            re.fullmatch(r"\n[ \t]*", opening)
            and self.text.startswith(closing, last)
            and "//" not in _strip_strings(between)
            and "/*" not in _strip_strings(between)
        ):
            return (node.start + 1, last + len(closing), "")
        tail = re.compile(r"[ \t]*,?").match(self.text, last)
        return (first, tail.end() if tail else last, "")

    def cut(
        self, entries: list[tuple[str | None, int, _Node]], gone: list[int], kept: list[int]
    ) -> None:
        """Cut `gone` (some entries are `kept`): a run that ends the container with the comma
        before it, every other entry with its own lines (or with the comma after it), so
        the comments of the entries around it stay theirs."""
        last = len(entries) - 1
        trailing = [i for i in gone if i > kept[-1]]
        if trailing:
            self.edits.append((entries[kept[-1]][2].end, entries[last][2].end, ""))
        for i in gone:
            if i > kept[-1]:
                continue
            start, end = entries[i][1], entries[i][2].end
            line_start = self.text.rfind("\n", 0, start) + 1
            after = re.compile(r"[ \t]*,[ \t]*(?://[^\n]*)?\n").match(self.text, end)
            ahead = self.text[line_start:start]
            if after and not ahead.strip() and line_start > (entries[i - 1][2].end if i else 0):
                self.edits.append((line_start, after.end(), ""))
                continue
            comma = re.compile(r"[ \t]*,[ \t]*").match(self.text, end)
            self.edits.append((start, comma.end() if comma else end, ""))

    def by_line(
        self,
        entries: list[tuple[str | None, int, _Node]],
        gone: list[int],
        inserts: list[tuple[int, list[str], list[Any]]],
        indent: str,
        rendered: Callable[[list[str], list[Any]], list[str]],
    ) -> bool:
        """Append one batch of entries after the last one, or cut a run of entries that ends
        the container, a line at a time: so the comment at the end of the last line stays
        with its entry, and a trailing comma stays where it is. False when the change is
        not that, or the lines are not laid out so (the caller edits by value then)."""
        if not entries or (gone and inserts) or len(inserts) > 1 or not (gone or inserts):
            return False
        if inserts:
            after, prefixes, values = inserts[0]
            if after != len(entries) - 1:
                return False
            end = entries[-1][2].end
            tail = _LINE_TAIL.fullmatch(self.text, end, self._line_end(end))
            if tail is None:
                return False
            body = ",\n".join(indent + text for text in rendered(prefixes, values))
            if tail.group(1):  # a trailing comma: ours gets one too
                self.edits.append((tail.end(), tail.end(), "\n" + body + ","))
            elif tail.end() == end:
                self.edits.append((end, end, ",\n" + body))
            else:  # the comma after the value, ours after the line's comment
                self.edits.append((end, end, ","))
                self.edits.append((tail.end(), tail.end(), "\n" + body))
            return True
        first = gone[0]
        if gone != list(range(first, len(entries))) or first == 0:
            return False
        start, end = entries[first][1], entries[-1][2].end
        previous = entries[first - 1][2].end
        line_start = self.text.rfind("\n", previous, start)
        own_line = _LINE_TAIL.fullmatch(self.text, previous, max(line_start, previous))
        ours = _LINE_TAIL.fullmatch(self.text, end, self._line_end(end))
        if line_start < 0 or own_line is None or ours is None or ours.group(2).strip():
            return False
        if self.text[line_start:start].strip():
            return False
        if ours.group(1):
            self.edits.append((line_start, end + ours.group(0).index(",") + 1, ""))
        elif own_line.group(1):
            comma = previous + own_line.group(0).index(",")
            self.edits.append((comma, comma + 1, ""))
            self.edits.append((line_start, end, ""))
        else:
            return False
        return True

    def _line_end(self, at: int) -> int:
        end = self.text.find("\n", at)
        return len(self.text) if end < 0 else end

    def line_indent(self, node: _Node, start: int | None = None) -> str:
        """The whitespace opening the line where `node` (or offset `start`) begins."""
        at = node.start if start is None else start
        line_start = self.text.rfind("\n", 0, at) + 1
        match = re.match(r"[ \t]*", self.text[line_start:at])
        return match.group() if match else ""

    def render(self, value: Any, indent: str | None) -> str:
        if indent is None:
            return json.dumps(value, ensure_ascii=False)
        text = json.dumps(value, indent=self.unit, ensure_ascii=False)
        return text.replace("\n", "\n" + indent)
