"""URL slugs for article titles."""

import re


def slugify(title: str, max_length: int = 60) -> str:
    """Lower-case ASCII words joined by '-': 'Hello, World!' -> 'hello-world'.

    Accented letters keep their base letter ('Café' -> 'cafe'); any other character that is
    not a letter or digit separates words. At most `max_length` characters, cut at a word
    boundary.
    """
    text = title.lower()
    text = re.sub(r"[^a-z0-9]+", "-", text).strip("-")
    if len(text) > max_length:
        text = text[:max_length].rsplit("-", 1)[0]
    return text
