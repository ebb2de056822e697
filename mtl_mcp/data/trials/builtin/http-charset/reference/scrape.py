"""Decode HTTP response bodies for the scraper."""

from email.message import Message


def decode_body(headers: dict[str, str], body: bytes) -> str:
    """The text of `body`, decoded with the charset that the Content-Type header names
    (e.g. 'text/html; charset=ISO-8859-1'), or UTF-8 when it names none.

    Header names are case-insensitive, as in HTTP.
    """
    content_type = next((v for k, v in headers.items() if k.lower() == "content-type"), "")
    message = Message()
    message["Content-Type"] = content_type or "text/plain"
    charset = message.get_content_charset() or "utf-8"
    return body.decode(charset)


def title_of(headers: dict[str, str], body: bytes) -> str:
    """The page's <title>, or '' when it has none."""
    text = decode_body(headers, body)
    start = text.lower().find("<title>")
    end = text.lower().find("</title>")
    if start < 0 or end < start:
        return ""
    return text[start + len("<title>") : end].strip()
