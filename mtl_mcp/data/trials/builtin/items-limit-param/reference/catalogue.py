"""The /items endpoint of the catalogue API, a WSGI app."""

import json
from urllib.parse import parse_qs

ITEMS = [{"id": i, "name": f"item {i}"} for i in range(1, 251)]


class BadParameter(ValueError):
    pass


def respond(start_response, status, payload):
    body = json.dumps(payload).encode("utf-8")
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
    return [body]


def whole_number(query, name, default, low, high=None):
    """The parameter `name` as an int in [low, high], or BadParameter naming it."""
    raw = query.get(name, [str(default)])[0]
    if not raw.isascii() or not raw.isdigit():
        raise BadParameter(f"{name} must be a whole number, not {raw!r}")
    value = int(raw)
    if value < low or (high is not None and value > high):
        top = f" to {high}" if high is not None else " or more"
        raise BadParameter(f"{name} must be {low}{top}, not {value}")
    return value


def app(environ, start_response):
    """GET /items?limit=N&offset=M: up to `limit` items (1 to 100, default 20) starting at
    `offset` (0 or more, default 0), as {"items": [...], "next_offset": int or null}.

    A parameter that is not a whole number in its range is a 400, {"error": "..."} naming it.
    """
    if environ.get("PATH_INFO") != "/items":
        return respond(start_response, "404 Not Found", {"error": "not found"})
    query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
    try:
        limit = whole_number(query, "limit", 20, 1, 100)
        offset = whole_number(query, "offset", 0, 0)
    except BadParameter as exc:
        return respond(start_response, "400 Bad Request", {"error": str(exc)})
    page = ITEMS[offset : offset + limit]
    next_offset = offset + limit if offset + limit < len(ITEMS) else None
    return respond(start_response, "200 OK", {"items": page, "next_offset": next_offset})
