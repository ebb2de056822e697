from wsgiref.util import setup_testing_defaults

from static import app


def get(path):
    environ = {"PATH_INFO": path}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, headers):
        seen["status"] = status

    body = b"".join(app(environ, start_response))
    return seen["status"], body


def test_a_public_file_is_served():
    status, body = get("/static/css/site.css")
    assert status == "200 OK" and b"sans-serif" in body


def test_a_missing_file_is_a_404():
    assert get("/static/nope.css")[0].startswith("404")


def test_dot_dot_cannot_leave_public():
    status, body = get("/static/../secret.txt")
    assert status.startswith("404")
    assert b"hunter2" not in body
