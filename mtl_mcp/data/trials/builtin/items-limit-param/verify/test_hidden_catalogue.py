import json
from wsgiref.util import setup_testing_defaults

import pytest

from catalogue import app


def get(query):
    environ = {"PATH_INFO": "/items", "QUERY_STRING": query}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    assert seen["headers"]["Content-Type"] == "application/json"
    assert int(seen["headers"]["Content-Length"]) == len(body)
    return int(seen["status"].split()[0]), json.loads(body)


@pytest.mark.parametrize(
    ("query", "name"),
    [("limit=abc", "limit"), ("limit=0", "limit"), ("limit=-5", "limit"), ("limit=101", "limit"),
     ("limit=1e3", "limit"), ("limit=2.5", "limit"), ("offset=-1", "offset"),
     ("offset=x", "offset"), ("limit=10&offset=-20", "offset")],
)
def test_a_bad_parameter_is_a_400_naming_it(query, name):
    status, payload = get(query)
    assert status == 400, payload
    assert name in payload["error"]


@pytest.mark.parametrize(
    ("query", "ids", "next_offset"),
    [("", list(range(1, 21)), 20), ("limit=1", [1], 1), ("limit=100&offset=200", list(range(201, 251)), None),
     ("offset=245", list(range(246, 251)), None), ("offset=250", [], None), ("offset=1000", [], None),
     ("limit=100", list(range(1, 101)), 100), ("limit=5&offset=10", list(range(11, 16)), 15)],
)
def test_good_parameters_page_through_the_items(query, ids, next_offset):
    status, payload = get(query)
    assert status == 200
    assert [item["id"] for item in payload["items"]] == ids
    assert payload["next_offset"] == next_offset
