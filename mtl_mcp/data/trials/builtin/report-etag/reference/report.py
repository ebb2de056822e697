"""GET /report: the daily report as JSON, with an ETag so that clients can revalidate."""

import hashlib
import json

REPORT = {"date": "2024-05-01", "orders": 1342, "revenue": "48210.75", "top": ["A-100", "B-200"]}


def etag_for(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:16] + '"'


def none_match(header: str | None, etag: str) -> bool:
    """Whether If-None-Match `header` matches `etag`: '*', or any tag of its list by the weak
    comparison (a W/ prefix does not count), as RFC 9110 asks of If-None-Match."""
    if header is None:
        return False
    if header.strip() == "*":
        return True
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return etag.removeprefix("W/") in tags


def app(environ, start_response):
    """GET /report answers 200 with the report and its ETag, or 304 Not Modified (no body)
    when the request's If-None-Match matches the current ETag (RFC 9110, section 13.1.2)."""
    body = json.dumps(REPORT, sort_keys=True).encode("utf-8")
    etag = etag_for(body)
    if none_match(environ.get("HTTP_IF_NONE_MATCH"), etag):
        start_response("304 Not Modified", [("ETag", etag)])
        return [b""]
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body))), ("ETag", etag)])
    return [body]
