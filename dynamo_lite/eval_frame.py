"""The Python side of the hook: turning capture on and off for this thread.

``enable(callback)`` is a context manager that installs ``callback`` as this
thread's hook callback (re-installing the interpreter-wide hook if another
PEP 523 user replaced it) and restores the previous one on exit.
``DisabledCall`` (from C) runs a callable with the hook off.
Tested by tests/test_api.py and tests/test_c_hook.py.
"""
from __future__ import annotations

import contextlib

from . import _C


class enable(contextlib.ContextDecorator):
    """Capture frames that start in this block with ``callback`` (None: capture nothing)."""

    __slots__ = ("callback", "prev")

    def __init__(self, callback):
        self.callback = callback
        self.prev = None

    def __enter__(self):
        self.prev = _C.set_callback(self.callback)
        return self

    def __exit__(self, *exc):
        _C.set_callback(self.prev)
        self.prev = None
        return False


def current_callback():
    return _C.get_callback()


def run_with(callback, fn, args, kwargs):
    """fn(*args, **kwargs) with ``callback`` active for this thread (the cached-call path)."""
    prev = _C.set_callback(callback)
    try:
        return fn(*args, **kwargs)
    finally:
        _C.set_callback(prev)


def clear_cache(code) -> None:
    _C.set_cache(code, None)
