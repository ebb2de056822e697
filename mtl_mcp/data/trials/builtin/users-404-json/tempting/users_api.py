"""A small users API, a WSGI app. Errors are JSON too: {"error": "..."}, with their status."""

import json
import re

USERS = {1: {"id": 1, "name": "Ada"}, 2: {"id": 2, "name": "Linus"}}


def json_response(start_response, status, payload):
    body = json.dumps(payload).encode("utf-8")
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start_response):
    path = environ.get("PATH_INFO", "")
    if environ.get("REQUEST_METHOD", "GET") != "GET":
        return json_response(start_response, "405 Method Not Allowed",
                             {"error": "method not allowed"})
    if path == "/users":
        return json_response(start_response, "200 OK", {"users": list(USERS.values())})
    match = re.fullmatch(r"/users/(\d+)", path)
    if match:
        user = USERS.get(int(match.group(1)))
        if user is None:
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"User not found"]
        return json_response(start_response, "200 OK", user)
    return json_response(start_response, "404 Not Found", {"error": "not found"})
