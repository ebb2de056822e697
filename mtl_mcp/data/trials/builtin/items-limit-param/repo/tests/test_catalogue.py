import json
from wsgiref.util import setup_testing_defaults

from catalogue import app


def get(query):
    environ = {"PATH_INFO": "/items", "QUERY_STRING": query}
    setup_testing_defaults(environ)
    seen = {}

    def start_response(status, headers):
        seen["status"], seen["headers"] = status, dict(headers)

    body = b"".join(app(environ, start_response))
    return seen["status"], json.loads(body)


def test_the_first_page_has_20_items():
    status, payload = get("")
    assert status == "200 OK"
    assert [item["id"] for item in payload["items"]] == list(range(1, 21))
    assert payload["next_offset"] == 20


def test_a_limit_that_is_not_a_number_is_a_400():
    status, payload = get("limit=abc")
    assert status.startswith("400")
    assert "limit" in payload["error"]
