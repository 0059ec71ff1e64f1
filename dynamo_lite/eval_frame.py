"""The Python side of the hook: turning capture on and off for this thread.

``enable(callback)`` is a context manager that installs ``callback`` as this
thread's hook callback (re-installing the interpreter-wide hook if another
PEP 523 user replaced it) and restores the previous one on exit.
``_C.CallWithHookOff`` / ``_C.CallWithCallback`` (csrc/call_scope.c) run a callable with the
hook off / with a given callback, from C.
Tested by tests/api/test_api.py and tests/unit/test_c_hook.py.
"""
from __future__ import annotations

import contextlib
import threading

from . import _C


class enable(contextlib.ContextDecorator):
    """Capture frames that start in this block with ``callback`` (None: capture nothing).

    Re-entrant and thread-safe: one instance (a decorator) may be entered again
    inside itself (recursion) and from several threads; each thread keeps its
    own stack of the callbacks to restore."""

    __slots__ = ("callback", "_local")

    def __init__(self, callback):
        self.callback = callback
        self._local = threading.local()

    def __enter__(self):
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append(_C.set_callback(self.callback))
        return self

    def __exit__(self, *exc):
        _C.set_callback(self._local.stack.pop())
        return False
