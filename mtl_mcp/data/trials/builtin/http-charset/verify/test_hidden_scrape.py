import pytest

from scrape import decode_body, title_of


@pytest.mark.parametrize(
    ("content_type", "text", "codec"),
    [
        ("text/html; charset=windows-1252", "Price: 5 € – “quoted”", "cp1252"),
        ("text/html; charset=ISO-8859-1", "Ã© is two letters here", "latin-1"),
        ('text/html; charset="utf-8"', "日本語のページ", "utf-8"),
        ("text/html;charset=UTF-8", "Zoë", "utf-8"),
        ("text/html; charset=ISO-8859-15", "€uro", "iso-8859-15"),
        ("text/plain; format=flowed; charset=koi8-r", "Привет", "koi8-r"),
        ("application/json; charset=utf-16", '{"name": "Zoë"}', "utf-16"),
        ("text/html; charset=shift_jis", "日本", "shift_jis"),
    ],
)
def test_the_declared_charset_decides(content_type, text, codec):
    assert decode_body({"Content-Type": content_type}, text.encode(codec)) == text


def test_header_names_are_case_insensitive():
    body = "Grüße".encode("cp1252")
    assert decode_body({"content-type": "text/plain; charset=cp1252"}, body) == "Grüße"
    assert decode_body({"CONTENT-TYPE": "text/plain; charset=cp1252"}, body) == "Grüße"


def test_no_charset_means_utf8():
    assert decode_body({"Content-Type": "text/html"}, "Zoë".encode("utf-8")) == "Zoë"
    assert decode_body({}, "Zoë".encode("utf-8")) == "Zoë"


def test_the_title_of_a_windows_1252_page():
    body = "<title>Caf\u00e9 \u2013 Men\u00fc</title>".encode("cp1252")
    assert title_of({"Content-Type": "text/html; charset=windows-1252"}, body) == "Café – Menü"
