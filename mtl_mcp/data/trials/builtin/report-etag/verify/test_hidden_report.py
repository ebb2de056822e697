import json
from wsgiref.util import setup_testing_defaults

import pytest

from report import app


def get(**headers):
    environ = {"PATH_INFO": "/report", **headers}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, response_headers):
        seen["status"], seen["headers"] = status, dict(response_headers)

    body = b"".join(app(environ, start_response))
    return int(seen["status"].split()[0]), seen["headers"], body


def current_etag():
    return get()[1]["ETag"]


@pytest.mark.parametrize(
    "header",
    [
        "{etag}",
        '"0000000000000000", {etag}',
        '{etag}, "0000000000000000"',
        '"aaaa",{etag},"bbbb"',
        "W/{etag}",
        '"x", W/{etag}',
        "*",
        "  {etag}  ",
    ],
)
def test_a_matching_if_none_match_is_a_304_without_a_body(header):
    etag = current_etag()
    status, headers, body = get(HTTP_IF_NONE_MATCH=header.format(etag=etag))
    assert status == 304
    assert body == b""
    assert headers["ETag"] == etag


@pytest.mark.parametrize("header", ['"0000000000000000"', '"a", "b"', "W/\"0\"", '""'])
def test_a_stale_tag_gets_the_report(header):
    status, headers, body = get(HTTP_IF_NONE_MATCH=header)
    assert status == 200
    assert json.loads(body)["orders"] == 1342
    assert int(headers["Content-Length"]) == len(body)


def test_the_unquoted_tag_is_not_a_match():
    """An entity tag is quoted; the bare hex is some other string."""
    status, _, _ = get(HTTP_IF_NONE_MATCH=current_etag().strip('"'))
    assert status == 200
