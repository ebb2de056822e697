from urllib.parse import quote
from wsgiref.util import setup_testing_defaults

import pytest

from static import app


def get(path):
    environ = {"PATH_INFO": path}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    return int(seen["status"].split()[0]), seen["headers"], body


@pytest.mark.parametrize(
    "path",
    [
        "/static/../secret.txt",
        "/static/%2e%2e/secret.txt",
        "/static/%2E%2E%2Fsecret.txt",
        "/static/css/../../secret.txt",
        "/static/css/%2e%2e/%2e%2e/secret.txt",
        "/static/..%2fsecret.txt",
    ],
)
def test_no_spelling_of_dot_dot_escapes(path):
    status, _, body = get(path)
    assert status == 404
    assert b"hunter2" not in body


def test_an_absolute_path_does_not_escape(tmp_path):
    outside = tmp_path / "private.txt"
    outside.write_text("outside-the-root", encoding="utf-8")
    for path in (f"/static/{outside}", "/static/" + quote(str(outside), safe="")):
        status, _, body = get(path)
        assert status == 404 and b"outside-the-root" not in body, path


@pytest.mark.parametrize(
    ("path", "needle", "content_type"),
    [
        ("/static/css/site.css", b"sans-serif", "text/css"),
        ("/static/index.html", b"<title>Shop", "text/html"),
        ("/static/notes..txt", b"two dots", "text/plain"),
        ("/static/css/./site.css", b"sans-serif", "text/css"),
    ],
)
def test_public_files_are_still_served(path, needle, content_type):
    status, headers, body = get(path)
    assert status == 200
    assert needle in body
    assert headers["Content-Type"] == content_type
    assert int(headers["Content-Length"]) == len(body)
