"""The Python view of the C cache (csrc/cache_entry.c): entries, limits, reset, display names.

The entries themselves live in C, one list per code object in its co_extra, and are read back
through ``_C.cache_entries``; nothing in Python keeps a copy of them.  This module owns the
bookkeeping around them, and is the only module-level cache state of dynamo_lite:

    _TOUCHED          codes whose C cache the callback set (entries or SKIP): what reset() clears
    _GENERATED        transformed code objects (marked SKIP in C: never captured themselves)
    _GENERATED_KIND   generated code -> (kind, where): resume functions and loop bodies, for
                      display_name() ("f (resumed at line 12)")
    _IN_LOOP_BODY     loop bodies and the resume functions made from them
    _COMPILE_TARGETS  codes of the functions given to compile() (kept across reset(): the user's
                      choice; convert_frame looks inside their arguments for tensors)
    _NOT_CAPTURED     code -> how many "nothing to capture" entries were made for it (at most
                      MAX_NOT_CAPTURED)
    _MADE             code -> how many compiled entries were made for it (dropped(): those C let
                      go of because an object their guard held weakly died)
    _LIMIT_WARNED     codes that reached config.cache_size_limit and were reported
    _BACKEND_WARNED   codes whose graph a backend failed to compile, warned about (suppress_errors)
    _FRAME_IDS        code -> the frame number in compile ids ("3/1": frame 3, its entry 1)
    _FRAME_SIZES      code -> what its compiles saw of input sizes and ints (shapes.FrameSizes:
                      automatic dynamic makes what changed symbolic)
    _DERIVED          code -> {key: what was computed from it}: its control-flow facts, resume
                      functions and loop bodies, made once per (code, place) and shared by every
                      entry and recompile (kept across reset(): they depend only on the code)

All are weak in the code objects.  ``reset()`` clears the C cache of every touched code and all
of the bookkeeping (generated codes stay SKIP: they are only reachable from dropped entries), so
no code object or graph stays alive because of us.  Imports only ``_C``: the bottom layer.
Tested by tests/unit/test_c_hook.py (the cache section) and tests/api/test_api.py (reset).
"""
from __future__ import annotations

import itertools
import types
import weakref

from . import _C

MAX_NOT_CAPTURED = 8  # "nothing to capture" entries per code (scalar argument types)

_TOUCHED: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
_GENERATED: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
_GENERATED_KIND: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_IN_LOOP_BODY: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
_COMPILE_TARGETS: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
_MADE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_NOT_CAPTURED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LIMIT_WARNED: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
_BACKEND_WARNED: "weakref.WeakSet[types.CodeType]" = weakref.WeakSet()
_FRAME_IDS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_FRAME_SIZES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_DERIVED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_frame_counter = itertools.count()


# ---- entries ------------------------------------------------------------------
def entries(code: types.CodeType, owner=None) -> list:
    """The compiled entries of ``code`` (those with a ``guard``: not the ALWAYS fallback, not
    "nothing to capture" entries), newest first; only ``owner``'s when given."""
    found = [e for e in _C.cache_entries(code)
             if e.guard is not None and (owner is None or e.owner is owner)]
    found.sort(key=lambda e: e.serial, reverse=True)
    return found


def record(code: types.CodeType, answer) -> None:
    """The callback answered ``answer`` for ``code``: remember the code if C will keep something
    (and count the compiled entries made for it)."""
    if answer is not _C.RUN_EAGER:
        _TOUCHED.add(code)
    if type(answer) is _C.CacheEntry and answer.guard is not None:
        _MADE[code] = _MADE.get(code, 0) + 1


def dropped(code: types.CodeType) -> int:
    """How many compiled entries of ``code`` C dropped because an object their guard held weakly
    died (csrc/cache_entry.c): made since reset() and not in the cache any more."""
    live = sum(1 for e in _C.cache_entries(code) if e.guard is not None)
    return max(0, _MADE.get(code, 0) - live)


def clear(code: types.CodeType) -> None:
    """Forget ``code``'s C cache (its next call asks the callback again)."""
    _C.set_cache(code, None)
    _MADE.pop(code, None)


# ---- generated code -------------------------------------------------------------
def add_generated(code: types.CodeType) -> None:
    """A transformed code object: marked SKIP, never captured itself."""
    _GENERATED.add(code)
    _C.set_cache(code, _C.SKIP)


def is_generated(code: types.CodeType) -> bool:
    return code in _GENERATED


def register_generated(code: types.CodeType, kind: str, where: str, parent: types.CodeType = None) -> None:
    """A resume function or loop body (captured like any frame) made from ``parent``: its kind and
    where it comes from."""
    _GENERATED_KIND[code] = (kind, where)
    if kind == "loop body" or (parent is not None and parent in _IN_LOOP_BODY):
        _IN_LOOP_BODY.add(code)


def mark_compile_target(code: types.CodeType) -> None:
    _COMPILE_TARGETS.add(code)


def is_compile_target(code: types.CodeType) -> bool:
    return code in _COMPILE_TARGETS


def generated_kind(code: types.CodeType):
    """"resume" or "loop body" for a code made from another, else None."""
    entry = _GENERATED_KIND.get(code)
    return None if entry is None else entry[0]


def in_loop_body(code: types.CodeType) -> bool:
    """A loop body, or a resume function of one (called once per iteration of its loop)."""
    return code in _IN_LOOP_BODY


def is_resume_code(code: types.CodeType) -> bool:
    return generated_kind(code) == "resume"


def is_loop_body(code: types.CodeType) -> bool:
    return generated_kind(code) == "loop body"


def display_name(code: types.CodeType) -> str:
    """The name diagnostics show: ``f``, ``f (resumed at line 12)``, ``f (loop body at line 9)``."""
    entry = _GENERATED_KIND.get(code)
    return code.co_name if entry is None else f"{code.co_name} ({entry[1]})"


def derived(code: types.CodeType, key):
    """What was computed from ``code`` for ``key`` (a resume function, a loop body), or None."""
    table = _DERIVED.get(code)
    return None if table is None else table.get(key)


def remember_derived(code: types.CodeType, key, made) -> None:
    """Keep ``made`` for ``(code, key)`` while ``code`` lives (neither may hold ``code``)."""
    table = _DERIVED.get(code)
    if table is None:
        table = _DERIVED[code] = {}
    table[key] = made


# ---- limits and ids -------------------------------------------------------------
def count_not_captured(code: types.CodeType) -> bool:
    """Count one more "nothing to capture" entry for ``code``; False once MAX_NOT_CAPTURED were made."""
    count = _NOT_CAPTURED.get(code, 0)
    if count >= MAX_NOT_CAPTURED:
        return False
    _NOT_CAPTURED[code] = count + 1
    return True


def first_limit_hit(code: types.CodeType) -> bool:
    """True the first time ``code`` reaches the cache size limit (until reset)."""
    if code in _LIMIT_WARNED:
        return False
    _LIMIT_WARNED.add(code)
    return True


def first_backend_failure(code: types.CodeType) -> bool:
    """True the first time a backend fails on a graph of ``code`` (until reset)."""
    if code in _BACKEND_WARNED:
        return False
    _BACKEND_WARNED.add(code)
    return True


def frame_id(code: types.CodeType) -> int:
    """The number of ``code`` in compile ids (given in order of first compile, until reset)."""
    fid = _FRAME_IDS.get(code)
    if fid is None:
        fid = _FRAME_IDS[code] = next(_frame_counter)
    return fid


def frame_sizes(code: types.CodeType, make):
    """The automatic-dynamic memory of ``code`` (made by ``make()`` the first time, until reset)."""
    sizes = _FRAME_SIZES.get(code)
    if sizes is None:
        sizes = _FRAME_SIZES[code] = make()
    return sizes


def reset() -> None:
    """Clear every C cache we set and all bookkeeping (frame numbers are not reused)."""
    for code in list(_TOUCHED) + list(_NOT_CAPTURED.keys()):
        _C.set_cache(code, None)
    _TOUCHED.clear()
    _NOT_CAPTURED.clear()
    _MADE.clear()
    _LIMIT_WARNED.clear()
    _BACKEND_WARNED.clear()
    _FRAME_IDS.clear()
    _FRAME_SIZES.clear()
