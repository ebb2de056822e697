"""The app's settings file: loaded at start-up, saved whenever the user changes a setting."""

import json
from pathlib import Path


def load(path: Path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def save(path: Path, settings: dict) -> None:
    """Write `settings` to `path` as JSON.

    If anything goes wrong while saving (a value that is not JSON, a full disk, a crash),
    the file keeps its previous content: the app must always be able to start from it.
    Nothing else is left in the file's folder.
    """
    with open(path, "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=2)
