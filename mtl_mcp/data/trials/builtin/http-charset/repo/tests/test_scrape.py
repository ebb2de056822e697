from scrape import decode_body, title_of


def test_utf8_by_default():
    assert decode_body({}, "naïve".encode("utf-8")) == "naïve"


def test_the_declared_charset_is_used():
    headers = {"Content-Type": "text/plain; charset=ISO-8859-1"}
    assert decode_body(headers, "café".encode("latin-1")) == "café"


def test_title():
    body = "<html><title> Ça marche </title></html>".encode("utf-8")
    assert title_of({"Content-Type": "text/html"}, body) == "Ça marche"
