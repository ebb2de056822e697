"""Serve the files under ./public at /static/<path>, a WSGI app."""

import mimetypes
from pathlib import Path
from urllib.parse import unquote

PUBLIC = Path(__file__).parent / "public"


def not_found(start_response):
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"not found"]


def app(environ, start_response):
    """GET /static/<path>: the file at public/<path>, or a 404. Nothing outside public/ is
    ever served."""
    path = environ.get("PATH_INFO", "")
    if not path.startswith("/static/") or ".." in path:
        return not_found(start_response)
    target = PUBLIC / unquote(path[len("/static/") :])
    if not target.is_file():
        return not_found(start_response)
    body = target.read_bytes()
    content_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    start_response("200 OK", [("Content-Type", content_type), ("Content-Length", str(len(body)))])
    return [body]
