"""Editing JSON as text: the result holds exactly the new value, and adding then removing
an entry gives back the same bytes, whatever the layout and the comments."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtl_mcp.operations.install.json_text import JsoncError, edited_text, parse

SCALARS = st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=8)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
DOCS = st.dictionaries(st.text(max_size=6), VALUES, max_size=4)
LAYOUTS = st.sampled_from([None, 2, 4, "\t"])


def objects(doc: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths of every object in `doc`, the root included."""
    found = [path] if isinstance(doc, dict) else []
    children = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else []
    )
    for key, value in children:
        found += objects(value, (*path, key))
    return found


def at(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


@settings(max_examples=150, deadline=None)
@given(doc=DOCS, layout=LAYOUTS, value=VALUES, where=st.integers(0, 50), data=st.data())
def test_adding_then_removing_a_member_gives_back_the_same_bytes(
    doc: dict[str, Any], layout: Any, value: Any, where: int, data: Any
) -> None:
    text = json.dumps(doc, indent=layout) + "\n"
    paths = objects(doc)
    path = paths[where % len(paths)]
    key = data.draw(st.text(max_size=6).filter(lambda k: k not in at(doc, path)))
    new = copy.deepcopy(doc)
    at(new, path)[key] = value
    added = edited_text(text, doc, new)
    assert parse(added) == new
    assert edited_text(added, new, doc) == text


@settings(max_examples=100, deadline=None)
@given(items=st.lists(VALUES, max_size=4), layout=LAYOUTS, value=VALUES)
def test_appending_then_removing_an_element_gives_back_the_same_bytes(
    items: list[Any], layout: Any, value: Any
) -> None:
    doc = {"hooks": {"Stop": items}}
    text = json.dumps(doc, indent=layout)
    new = copy.deepcopy(doc)
    new["hooks"]["Stop"].append(value)
    added = edited_text(text, doc, new)
    assert parse(added) == new
    assert edited_text(added, new, doc) == text


COMMENTED = """// settings
{
  /* the theme */
  "theme": "dark", // mine
  "list": [1, 2,], // a trailing comma
  "url": "http://example.com/a//b",
}
"""


def test_comments_trailing_commas_and_slashes_in_strings_survive() -> None:
    old = parse(COMMENTED)
    assert old == {"theme": "dark", "list": [1, 2], "url": "http://example.com/a//b"}
    new = old | {"mcpServers": {"mtl-mcp": {"command": "x"}}}
    added = edited_text(COMMENTED, old, new)
    assert parse(added) == new
    assert '"url": "http://example.com/a//b",\n  "mcpServers"' in added  # its comma kept
    assert '"theme": "dark", // mine' in added and "/* the theme */" in added
    assert edited_text(added, new, old) == COMMENTED


def test_a_comment_ending_the_last_line_stays_on_its_line() -> None:
    text = '{\n  "theme": "dark" // mine\n}\n'
    old = parse(text)
    new = old | {"mcpServers": {}}
    added = edited_text(text, old, new)
    assert added == '{\n  "theme": "dark", // mine\n  "mcpServers": {}\n}\n'
    assert edited_text(added, new, old) == text


@pytest.mark.parametrize(
    "text",
    [
        '{\r\n  // mine\r\n  "theme": "dark",\r\n  "list": [1, 2,],\r\n}\r\n',
        '{\r\n  "theme": "dark" // mine\r\n}\r\n',
        "{}\r\n",
    ],
)
def test_a_crlf_file_gets_crlf_lines_and_its_bytes_back(text: str) -> None:
    """A file written on Windows: the lines an edit adds end in CRLF too (not a file of
    mixed line endings), and removing them gives back the same bytes."""
    old = parse(text)
    new = old | {"mcpServers": {"mtl-mcp": {"command": "x", "args": ["serve"]}}}
    added = edited_text(text, old, new)
    assert parse(added) == new
    assert "\n" not in added.replace("\r\n", "") and "\r\r" not in added
    assert edited_text(added, new, old) == text


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{\n  "theme": "dark", // see {docs}\n  "vim": true\n}\n', {"theme": "dark", "vim": True}),
        ('{"fonts": [1, // e.g. [2]\n 3]}', {"fonts": [1, 3]}),
        ('{"a": 1, /* one */ "b": 2 /* two */}', {"a": 1, "b": 2}),
    ],
)
def test_a_comma_before_a_comment_holding_a_bracket_is_not_a_trailing_one(
    text: str, value: dict[str, Any]
) -> None:
    """A comment after a comma may hold a } or ] (Zed's settings have plenty), or be followed
    by another comment before the end: the comma stays, and so does the member after it."""
    assert parse(text) == value


@pytest.mark.parametrize("text", ["{", '{"a" 1}', "{} x", '{"a": tru}', "[1,,]"])
def test_what_is_not_json_even_with_comments_is_refused(text: str) -> None:
    with pytest.raises((JsoncError, ValueError)):
        parse(text)


OURS = {"command": "/opt/mtl-mcp", "args": ["serve"]}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (  # ours between two others, each with its comment
            '{\n  "servers": {\n    "a": {"command": "x"}, // a\'s comment\n'
            '    "mtl-mcp": {"command": "/opt/mtl-mcp", "args": ["serve"]},\n'
            '    // b comes next\n    "b": {"command": "y"} // b\'s\n  }\n}\n',
            '{\n  "servers": {\n    "a": {"command": "x"}, // a\'s comment\n'
            '    // b comes next\n    "b": {"command": "y"} // b\'s\n  }\n}\n',
        ),
        (  # ours first, a comment above the next
            '{"servers": {\n  "mtl-mcp": {"command": "/opt/mtl-mcp", "args": ["serve"]},\n'
            '  /* b */ "b": 1\n}}',
            '{"servers": {\n  /* b */ "b": 1\n}}',
        ),
        (  # on one line
            '{"servers": {"a": 1, /* a */ "mtl-mcp": {"command": "/opt/mtl-mcp", "args": '
            '["serve"]}, "b": 2}}',
            '{"servers": {"a": 1, /* a */ "b": 2}}',
        ),
    ],
    ids=["middle", "first", "one line"],
)
def test_removing_an_entry_that_is_not_the_last_keeps_its_neighbours_comments(
    text: str, expected: str
) -> None:
    """The user added a server after ours since install: uninstall cuts our lines only."""
    old = parse(text)
    new = copy.deepcopy(old)
    del new["servers"]["mtl-mcp"]
    assert old["servers"]["mtl-mcp"] == OURS
    assert edited_text(text, old, new) == expected


@pytest.mark.parametrize(
    "text",
    [
        '{\n  "servers": {// keep me\n  }\n}\n',
        '{\n  "servers": {\n    /* keep me */\n  },\n  "inputs": []\n}',
        '{"servers": {}, "inputs": []}',
        '{"servers": { }}',
        '{"servers": {\n\n}}',
    ],
)
def test_filling_an_empty_container_keeps_its_comments_and_gives_its_bytes_back(
    text: str,
) -> None:
    old = parse(text)
    new = copy.deepcopy(old)
    new["servers"]["mtl-mcp"] = OURS
    added = edited_text(text, old, new)
    assert parse(added) == new
    for comment in ("// keep me", "/* keep me */"):
        assert (comment in added) is (comment in text)
    assert edited_text(added, new, old) == text
