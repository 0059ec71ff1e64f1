"""Log artifacts: ``DYNAMO_LITE_LOGS`` and ``dynamo_lite.set_logs()``, TORCH_LOGS-style.

The settings string is a comma-separated list of names (spaces ignored):

    graph_breaks   every graph break / eager fallback: id, reason, user stack
                   (+graph_breaks: the tracker stack and locals at each break)
    recompiles     why a frame is compiled again: the first guard that failed
    guards         the guards of every new cache entry
    graph_code     the FX graph of every captured graph
    bytecode       original and transformed bytecode of every compiled frame
                   (plus decompiled Python source when ``depyf`` is installed)
    dynamo_lite    all of the above and dynamo_lite's own messages
    +NAME          NAME at DEBUG level (more detail: e.g. +recompiles lists the
                   failure of every cache entry, not only the newest)
    -NAME          NAME at ERROR level (silence it)
    help           print this list

``DYNAMO_LITE_LOGS`` is read once, when dynamo_lite is imported (an invalid
value warns and is ignored).  ``set_logs("graph_breaks,+recompiles")`` or
``set_logs(graph_breaks=True, dynamo_lite=logging.DEBUG)`` replaces the whole
setting; ``set_logs()`` restores the default: the ``dynamo_lite`` logger at WARNING
(warnings such as the cache limit propagate to the root logger as for any
library; INFO records need an artifact, or a level set on the logger).
``DYNAMO_LITE_LOGS_OUT=path`` also writes the lines to a file.

Each artifact is a logger named ``dynamo_lite.<artifact>``; the content of an
artifact is logged at INFO, extra detail at DEBUG, so enabling an artifact at
INFO shows it.  Lines about one compile carry ``[frame_id/compile_id]`` (e.g.
``[3/1]``: frame 3, its second compile), the same id as ``compile_id`` in the
structured events.  Formatting is lazy: nothing is rendered for a disabled
artifact.
Tested by tests/api/test_logging.py.
"""
from __future__ import annotations

import dis
import io
import logging
import os
import sys
import warnings
from typing import Optional, Union

ROOT = "dynamo_lite"
ARTIFACTS = {
    "graph_breaks": "graph breaks and eager fallbacks, with the user stack (+: the trackers at each break)",
    "recompiles": "recompilations, with the guard that failed",
    "guards": "the guards of every new cache entry",
    "graph_code": "the FX graph code of every captured graph",
    "bytecode": "original and transformed bytecode (and depyf source when installed)",
    "repeated_blocks": "repeated blocks captured once: each template, each call that replayed it or not, and why",
    "persistent_cache": "frames loaded from the persistent capture cache (+: misses and entries not stored, why)",
}
_FORMAT = "%(levelname).1s%(asctime)s.%(msecs)03d %(name)s] %(message)s"
_DATEFMT = "%m%d %H:%M:%S"


class _StderrHandler(logging.StreamHandler):
    """Writes to the *current* sys.stderr (so pytest's capture and redirect_stderr see it)."""

    def __init__(self):
        super().__init__(sys.stderr)

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value):
        pass


_HANDLERS: list[logging.Handler] = []  # handlers we installed on the "dynamo_lite" logger
_SETTINGS: dict[str, int] = {}  # current setting: name -> level


def help_text() -> str:
    lines = ["DYNAMO_LITE_LOGS / dynamo_lite.set_logs(): comma-separated names.", "Artifacts:"]
    lines += [f"  {name:<13} {text}" for name, text in ARTIFACTS.items()]
    lines += [f"  {ROOT:<13} everything above, and dynamo_lite's own messages",
              "Prefix a name with + for DEBUG level (more detail), with - for ERROR level (silence).",
              "Examples: DYNAMO_LITE_LOGS=graph_breaks,recompiles   DYNAMO_LITE_LOGS=+dynamo_lite"]
    return "\n".join(lines)


def parse(spec: str) -> dict[str, int]:
    """``"graph_breaks,+guards"`` -> ``{"graph_breaks": INFO, "guards": DEBUG}``; ValueError when invalid."""
    settings: dict[str, int] = {}
    for raw in "".join(spec.split()).split(","):
        if not raw:
            continue
        level = logging.INFO
        name = raw
        if raw[0] == "+":
            level, name = logging.DEBUG, raw[1:]
        elif raw[0] == "-":
            level, name = logging.ERROR, raw[1:]
        if name == "all":
            name = ROOT
        if name == "help":
            raise ValueError(help_text())
        if name not in ARTIFACTS and name != ROOT:
            raise ValueError(f"unknown dynamo_lite log name {name!r} in {spec!r}\n{help_text()}")
        settings[name] = level
    return settings


def set_logs(spec: Optional[str] = None, *, dynamo_lite: Optional[int] = None,
             graph_breaks: Union[bool, int] = False, recompiles: Union[bool, int] = False,
             guards: Union[bool, int] = False, graph_code: Union[bool, int] = False,
             bytecode: Union[bool, int] = False, repeated_blocks: Union[bool, int] = False,
             persistent_cache: Union[bool, int] = False) -> None:
    """Choose what dynamo_lite logs to stderr (replaces the previous choice).

    ``spec`` uses the DYNAMO_LITE_LOGS syntax (``"graph_breaks,+recompiles"``).
    Keywords: an artifact is ``True`` (INFO), ``False`` (off) or a logging
    level; ``dynamo_lite=logging.DEBUG`` turns on everything at that level.
    ``set_logs()`` with no arguments restores the default.
    """
    settings = parse(spec) if spec else {}
    kw = {"graph_breaks": graph_breaks, "recompiles": recompiles, "guards": guards,
          "graph_code": graph_code, "bytecode": bytecode, "repeated_blocks": repeated_blocks,
          "persistent_cache": persistent_cache}
    for name, value in kw.items():
        if value is True:
            settings[name] = logging.INFO
        elif value is not False and value is not None:
            settings[name] = int(value)
    if dynamo_lite is not None:
        settings[ROOT] = int(dynamo_lite)
    _apply(settings)


def _apply(settings: dict[str, int]) -> None:
    root = logging.getLogger(ROOT)
    for handler in _HANDLERS:
        root.removeHandler(handler)
    _HANDLERS.clear()
    _SETTINGS.clear()
    _SETTINGS.update(settings)
    for name in ARTIFACTS:
        logging.getLogger(f"{ROOT}.{name}").setLevel(settings.get(name, logging.NOTSET))
    if not settings:
        # as torch's loggers: quiet below WARNING unless asked for (so an application's
        # INFO-level logging setup, or pytest's caplog, does not fill with our records)
        root.setLevel(logging.WARNING)
        root.propagate = True
        return
    # An artifact not named is quiet unless "dynamo_lite" itself was named.
    root_level = settings.get(ROOT)
    for name in ARTIFACTS:
        if name not in settings:
            logging.getLogger(f"{ROOT}.{name}").setLevel(logging.NOTSET if root_level is not None
                                                         else logging.WARNING)
    root.setLevel(root_level if root_level is not None else logging.WARNING)
    formatter = logging.Formatter(_FORMAT, _DATEFMT)
    handler: logging.Handler = _StderrHandler()
    handler.setFormatter(formatter)
    _HANDLERS.append(handler)
    out = os.environ.get("DYNAMO_LITE_LOGS_OUT")
    if out:
        file_handler = logging.FileHandler(out)
        file_handler.setFormatter(formatter)
        _HANDLERS.append(file_handler)
    for h in _HANDLERS:
        root.addHandler(h)
    root.propagate = False  # our handler prints it; do not print it twice through the root logger


def get_settings() -> dict[str, int]:
    """The active setting (name -> level); empty when nothing is configured."""
    return dict(_SETTINGS)


def _init_from_env() -> None:
    spec = os.environ.get("DYNAMO_LITE_LOGS", "")
    settings: dict = {}
    if spec:
        try:
            settings = parse(spec)
        except ValueError as e:
            if spec.strip() in ("help", "+help"):
                print(help_text(), file=sys.stderr)
            else:
                warnings.warn(f"DYNAMO_LITE_LOGS ignored: {e}", stacklevel=2)
    _apply(settings)


class lazy:
    """``str(lazy(fn, *args))`` calls ``fn(*args)``: log arguments rendered only when emitted."""

    __slots__ = ("fn", "args", "kwargs")

    def __init__(self, fn, *args, **kwargs):
        self.fn, self.args, self.kwargs = fn, args, kwargs

    def __str__(self) -> str:
        return str(self.fn(*self.args, **self.kwargs))


def format_code_change(original, transformed) -> str:
    """The ``bytecode`` artifact: dis of the original and the transformed code
    (and of the resume functions' code objects they load), plus depyf source when available."""
    buf = io.StringIO()
    buf.write(f"ORIGINAL BYTECODE {original.co_name} {original.co_filename} line {original.co_firstlineno}\n")
    dis.dis(original, file=buf, depth=0)
    buf.write(f"\nMODIFIED BYTECODE {transformed.co_name}\n")
    dis.dis(transformed, file=buf, depth=0)
    source = _decompile(transformed)
    if source:
        buf.write(f"\nPOSSIBLE SOURCE CODE (depyf)\n{source}")
    return buf.getvalue().rstrip("\n")


def _decompile(code) -> str:
    try:
        import depyf
    except ImportError:
        return ""
    try:
        return depyf.decompile(code)
    except Exception as e:  # noqa: BLE001 - depyf is best effort
        return f"(depyf could not decompile it: {type(e).__name__}: {e})"


_init_from_env()

__all__ = ["set_logs", "parse", "help_text", "get_settings", "lazy", "format_code_change", "ARTIFACTS"]
