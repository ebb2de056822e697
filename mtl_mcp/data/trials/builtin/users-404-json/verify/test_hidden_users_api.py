import json
from wsgiref.util import setup_testing_defaults

import pytest

from users_api import app


def call(path, method="GET"):
    environ = {"PATH_INFO": path, "REQUEST_METHOD": method}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    return int(seen["status"].split()[0]), seen["headers"], body


@pytest.mark.parametrize("path", ["/users/99", "/users/0", "/users/3", "/users/007"])
def test_an_unknown_user_is_a_json_404_like_every_other_error(path):
    status, headers, body = call(path)
    assert status == 404
    assert headers["Content-Type"] == "application/json"
    assert int(headers["Content-Length"]) == len(body)
    assert isinstance(json.loads(body)["error"], str)


def test_known_users_and_other_errors_are_unchanged():
    assert call("/users/2")[2] == b'{"id": 2, "name": "Linus"}'
    assert json.loads(call("/users")[2]) == {"users": [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Linus"}]}
    status, _, body = call("/nowhere")
    assert (status, json.loads(body)) == (404, {"error": "not found"})
    status, _, body = call("/users/1", method="DELETE")
    assert (status, json.loads(body)) == (405, {"error": "method not allowed"})
