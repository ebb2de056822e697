"""Who wants to hear of every change to the insights: the open dashboard's live feed."""

from __future__ import annotations

import contextlib
from collections.abc import Callable


class ChangeListeners:
    """Callbacks run after every change to the insights, in the writing thread: each must
    be quick and never raise. The owner of a memory (the service's keeper, the dashboard's
    own source) calls this from the memory's `on_change`."""

    def __init__(self) -> None:
        self._listeners: list[Callable[[], None]] = []

    def add(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def remove(self, listener: Callable[[], None]) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def __call__(self) -> None:
        for listener in list(self._listeners):
            listener()
