import json
from wsgiref.util import setup_testing_defaults

from users_api import app


def get(path):
    environ = {"PATH_INFO": path}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, headers):
        seen["status"] = status

    body = b"".join(app(environ, start_response))
    return seen["status"], body


def test_a_user():
    status, body = get("/users/1")
    assert status == "200 OK" and json.loads(body)["name"] == "Ada"


def test_an_unknown_user_is_a_404():
    status, _ = get("/users/99")
    assert status.startswith("404")
