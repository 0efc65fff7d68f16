"""The one place a failure of any kind is caught: a boundary whose failure must end only that part (a
tool's run, a hook, a listener, a third-party library, memory), never the session. Everywhere else catches
the exceptions that can really occur, by name; each caller of ``guarded`` says what a failure becomes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T")


def guarded(call: Callable[[], _T], on_error: Callable[[Exception], _T]) -> _T:
    """``call()``, or ``on_error(exc)`` when it raised ``exc`` (an ``Exception``: Ctrl-C and exits pass).

    ``on_error`` may raise, to let through what the caller means to let through (the user's interrupt)."""
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the boundary; what a failure becomes is the caller's
        return on_error(exc)


def ignored(_exc: Exception) -> None:
    """``on_error`` for a best-effort call (closing, telling a listener): a failure changes nothing."""
    return None
