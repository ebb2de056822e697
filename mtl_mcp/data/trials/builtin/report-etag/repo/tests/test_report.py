from wsgiref.util import setup_testing_defaults

from report import app


def get(**headers):
    environ = {"PATH_INFO": "/report", **headers}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, response_headers):
        seen["status"], seen["headers"] = status, dict(response_headers)

    body = b"".join(app(environ, start_response))
    return seen["status"], seen["headers"], body


def test_the_report_has_an_etag():
    status, headers, body = get()
    assert status == "200 OK" and body and headers["ETag"]


def test_revalidating_with_the_etag_is_a_304():
    _, headers, _ = get()
    status, _, body = get(HTTP_IF_NONE_MATCH=headers["ETag"])
    assert status == "304 Not Modified"
    assert body == b""
