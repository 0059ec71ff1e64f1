"""Graph breaks of a whole run, for people: where in *their* code, whose they are, what to do.

The pytest plugin's terminal summary, its JSON/HTML/Markdown reports, its marker
messages and ``explain()`` all describe a break through ``BreakSite``:

    classify(filename)        -> Origin: user code, a library (named), or generated code
    BreakSite.of(event, root) -> the nearest frame of the user's code (the location), the
                                 innermost frame (kept for the record), the user's frames of
                                 the whole stack (the callers of the compiled frame, then the
                                 frames it inlined), the cause and the hints that apply
    group_sites(sites)        -> Groups by (break id, location), most frequent first
    table_lines(...)          -> the summary table that fits a screen
    render_markdown(report) / render_html(report)   the whole picture, from the JSON report

Invariants:
- A location is in the user's code whenever any frame of the stack is: frames of
  torch, dynamo_lite, the standard library, installed packages (site-packages,
  dist-packages) and generated code (``<string>``, torch.fx and inductor output)
  are never the location unless no frame is the user's.
- The cause comes from the registry (``graph_breaks.CODE`` / ``DYNAMO_LITE``); hints are
  the registry's, shown only where they apply: inside a library the user's code is
  not where the change goes, and ``hints_only_in`` limits hints to some functions.
- Nothing here imports torch (the plugin imports this in every pytest run).
Tested by tests/unit/test_report_summary.py and tests/api/test_pytest_plugin_report.py.
"""
from __future__ import annotations

import dataclasses
import functools
import html
import importlib.util
import os
import sysconfig
from typing import Any, Iterable, Optional

from .. import graph_breaks
from ..exc import UserFrame

CAUSE_LABELS = {graph_breaks.CODE: "your code", graph_breaks.DYNAMO_LITE: "dynamo_lite"}
_SITE_DIRS = ("site-packages", "dist-packages")
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_OWN_USER_FILES = (_OWN_DIR + "demo.py",)  # the README's demo model is user code


@dataclasses.dataclass(frozen=True)
class Origin:
    """Whose code a file is."""

    kind: str  # "user", "library" or "generated"
    library: Optional[str] = None  # for "library": "torch", "transformers", "the standard library", ...

    @property
    def is_user(self) -> bool:
        return self.kind == "user"

    def describe(self) -> str:
        return self.library if self.kind == "library" and self.library else "generated code"


@functools.lru_cache(maxsize=None)
def _package_dir(name: str) -> Optional[str]:
    """The directory of an installed top-level package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.abspath(list(spec.submodule_search_locations)[0]) + os.sep


@functools.lru_cache(maxsize=None)
def _stdlib_dirs() -> tuple:
    return tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})


@functools.lru_cache(maxsize=4096)
def classify(filename: str) -> Origin:
    """Whose code ``filename`` is (see the module docstring)."""
    if not filename:
        return Origin("generated")
    if filename.startswith("<"):
        return Origin("library", "the standard library") if filename.startswith("<frozen") else Origin("generated")
    path = os.path.abspath(filename)
    if path.startswith(_OWN_DIR):
        return Origin("user") if path in _OWN_USER_FILES else Origin("library", "dynamo_lite")
    torch_dir = _package_dir("torch")
    if torch_dir and path.startswith(torch_dir):
        return Origin("library", "torch")
    parts = path.split(os.sep)
    if any(p.startswith("torchinductor_") for p in parts):
        return Origin("generated")  # inductor's generated kernels and wrappers
    for i, part in enumerate(parts[:-1]):
        if part in _SITE_DIRS:
            top = parts[i + 1]
            return Origin("library", top[:-3] if top.endswith(".py") else top)
    if path.startswith(_stdlib_dirs()):
        return Origin("library", "the standard library")
    return Origin("user")


def relative_location(frame: Optional[UserFrame], root: Optional[str]) -> str:
    """``path:line`` of a frame, the path relative to ``root`` when it is under it."""
    if frame is None:
        return "<unknown>"
    filename = frame.filename
    if root and filename and not filename.startswith("<"):
        try:
            rel = os.path.relpath(filename, root)
            if not rel.startswith(".."):
                filename = rel
        except ValueError:
            pass
    return f"{filename}:{frame.lineno}"


def applicable_hints(break_id: str, innermost: Optional[UserFrame]) -> list[str]:
    """The registry hints of ``break_id`` that apply to a break whose innermost frame is ``innermost``."""
    bt = graph_breaks.lookup(break_id)
    origin = classify(innermost.filename) if innermost is not None else Origin("generated")
    if not origin.is_user:
        if bt.cause == graph_breaks.CODE:
            return [f"It happens inside {origin.describe()}, not in your code: change how your code calls it "
                    "(the location shown), or leave it."]
        return []
    if bt.hints_only_in and (innermost is None or innermost.name not in bt.hints_only_in):
        return []
    return list(bt.hints)


def message(break_id: str, reason: str) -> str:
    """The break as one sentence that says whose it is."""
    if graph_breaks.lookup(break_id).cause == graph_breaks.DYNAMO_LITE:
        return f"dynamo_lite does not trace this yet: {reason}"
    return reason


@dataclasses.dataclass
class BreakSite:
    """One graph break or fallback, placed in the user's code."""

    break_id: str
    kind: str  # "graph_break" or "fallback"
    reason: str
    cause: str  # graph_breaks.CODE or graph_breaks.DYNAMO_LITE
    location: Optional[UserFrame]  # nearest frame of the user's code (innermost if none is)
    innermost: Optional[UserFrame]  # where it really happened (may be a library's frame)
    user_stack: list  # the user's frames of the whole stack, outermost first
    origin: Origin  # whose code the innermost frame is
    hints: list[str]  # applicable hints
    where: str  # relative_location(location, root)

    @classmethod
    def of(cls, event: Any, root: Optional[str] = None) -> "BreakSite":
        """``event``: a GraphBreakEvent or FallbackEvent (anything with their fields)."""
        stack = list(getattr(event, "caller_stack", None) or []) + list(event.user_stack or [])
        user = [f for f in stack if classify(f.filename).is_user]
        innermost = stack[-1] if stack else None
        location = user[-1] if user else innermost
        origin = classify(innermost.filename) if innermost is not None else Origin("generated")
        return cls(event.break_id, event.kind, event.reason, graph_breaks.lookup(event.break_id).cause,
                   location, innermost, user, origin, applicable_hints(event.break_id, innermost),
                   relative_location(location, root))

    @property
    def message(self) -> str:
        return message(self.break_id, self.reason)

    @property
    def title(self) -> str:
        return graph_breaks.lookup(self.break_id).title

    @property
    def in_library(self) -> Optional[str]:
        """The library (or "generated code") the break happened in, when not the user's code."""
        return None if self.origin.is_user else self.origin.describe()

    def to_dict(self) -> dict:
        return {"cause": self.cause, "message": self.message, "location": _frame_dict(self.location),
                "where": self.where, "innermost": _frame_dict(self.innermost), "in_library": self.in_library,
                "user_code_stack": [_frame_dict(f) for f in self.user_stack], "hints": list(self.hints)}

    def lines(self) -> list[str]:
        """As a failure message shows it: id, title, kind, message, the user's stack, hints."""
        kind = "graph break" if self.kind == "graph_break" else "frame ran eagerly"
        out = [f"[{self.break_id}] {self.title} ({kind}): {self.message}"]
        out += [str(f) for f in self.user_stack]
        if self.innermost is not None and self.innermost is not self.location:
            out.append(f"  (inside {self.in_library or 'other code'}: {self.innermost.filename}:"
                       f"{self.innermost.lineno} in {self.innermost.name})")
        out += [f"  hint: {h}" for h in self.hints[:1]]
        return out


def _frame_dict(frame: Optional[UserFrame]) -> Optional[dict]:
    if frame is None:
        return None
    return {"filename": frame.filename, "lineno": frame.lineno, "name": frame.name, "line": frame.line}


@dataclasses.dataclass
class Group:
    """Breaks of one id at one location of the user's code."""

    break_id: str
    where: str
    site: BreakSite  # the first one seen
    count: int = 0
    tests: list = dataclasses.field(default_factory=list)  # test ids, in order, once each
    fallbacks: int = 0  # how many of ``count`` were whole-frame fallbacks

    def to_dict(self) -> dict:
        s = self.site
        return {"break_id": self.break_id, "title": s.title, "cause": s.cause, "location": self.where,
                "count": self.count, "fallbacks": self.fallbacks, "tests": list(self.tests),
                "reason": s.reason, "message": s.message, "kind": s.kind, "in_library": s.in_library,
                "hints": list(s.hints), "user_code_stack": [_frame_dict(f) for f in s.user_stack]}


def group_sites(sites: Iterable[tuple]) -> list[Group]:
    """Groups of ``(test_id, BreakSite)`` pairs by (break id, location), most frequent first."""
    groups: dict = {}
    for test_id, site in sites:
        key = (site.break_id, site.where)
        g = groups.get(key)
        if g is None:
            g = groups[key] = Group(site.break_id, site.where, site)
        g.count += 1
        g.fallbacks += site.kind == "fallback"
        if test_id not in g.tests:
            g.tests.append(test_id)
    return sorted(groups.values(), key=lambda g: (-g.count, -len(g.tests), g.break_id, g.where))


def attribution_line(groups: list) -> str:
    """How many breaks (and places) are inherent to the code, how many are dynamo_lite's limitations."""
    total = sum(g.count for g in groups)
    code = [g for g in groups if g.site.cause == graph_breaks.CODE]
    ours = [g for g in groups if g.site.cause != graph_breaks.CODE]
    return (f"{_plural(total, 'break')} at {_plural(len(groups), 'place')}: "
            f"{sum(g.count for g in code)} inherent to your code ({_plural(len(code), 'place')}), "
            f"{_plural(sum(g.count for g in ours), 'dynamo_lite limitation')} ({_plural(len(ours), 'place')})")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:max(width - 3, 10)] + "..."


def table_lines(groups: list, *, width: int = 80, max_rows: int = 20, max_lines: int = 26,
                more: str = "") -> list[str]:
    """The grouped breaks as at most ``max_lines`` lines: a header, one line per group (the top
    ``max_rows``), how many more there are, and the hints of the rows shown (as many as fit)."""
    shown = groups[:max_rows]
    # the location gets at most a third of the line (its end: the file name and line), the break the rest
    loc_width = min(max([len(g.where) for g in shown] + [8]), max(20, min(40, width // 3)))
    lines = [f"{'count':>5} {'tests':>5}  {'cause':<11} {'location':<{loc_width}}  break"]
    for g in shown:
        where = g.where if len(g.where) <= loc_width else "..." + g.where[-(loc_width - 3):]
        fallback = " (frame ran eagerly)" if g.fallbacks == g.count else ""
        lines.append(_clip(f"{g.count:>5} {len(g.tests):>5}  {CAUSE_LABELS.get(g.site.cause, g.site.cause):<11} "
                           f"{where:<{loc_width}}  {g.break_id} {g.site.reason}{fallback}", width))
    rest = groups[len(shown):]
    if rest:
        lines.append(_clip(f"... {_plural(len(rest), 'more place')} with {_plural(sum(g.count for g in rest), 'break')}"
                           + (f" {more}" if more else ""), width))
    hints = []
    for g in shown:
        if g.site.hints and (g.break_id, g.site.hints[0]) not in hints:
            hints.append((g.break_id, g.site.hints[0]))
    room = max_lines - len(lines) - 1
    if hints and room > 0:
        lines.append("hints:")
        for break_id, hint in hints[:room]:
            lines.append(f"  {break_id}  {hint}")  # not clipped: it is what to do
    return lines


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# ---------------------------------------------------------------------------
# The whole picture, rendered from the JSON report (pytest_plugin.build_report)
def _totals_text(report: dict) -> str:
    t = report["totals"]
    return (f"{t['tests_compiling']} of {_plural(t['tests'], 'test')} compiled code: {_plural(t['frames'], 'frame')}, "
            f"{_plural(t['graphs'], 'graph')}, {_plural(t['graph_breaks'], 'graph break')}, "
            f"{_plural(t['recompiles'], 'recompile')}, {_plural(t['fallbacks'], 'fallback')}")


def render_markdown(report: dict) -> str:
    """The report as a Markdown page: totals, every break group, every test with breaks."""
    def cell(text: object) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    out = ["# dynamo_lite graph breaks", "", _totals_text(report), ""]
    if report.get("attribution"):
        out += [report["attribution"], ""]
    groups = report.get("break_types", [])
    if groups:
        out += ["| count | tests | cause | location | break | what happened | hint |",
                "| ---: | ---: | --- | --- | --- | --- | --- |"]
        for g in groups:
            where = g["location"] + (f" (inside {g['in_library']})" if g.get("in_library") else "")
            out.append(f"| {g['count']} | {len(g['tests'])} | {CAUSE_LABELS.get(g['cause'], g['cause'])} | "
                       f"`{cell(where)}` | {g['break_id']} {cell(g['title'])} | {cell(g['message'])} | "
                       f"{cell(g['hints'][0]) if g['hints'] else ''} |")
        out.append("")
    tests = [t for t in report.get("tests", []) if t["graph_breaks"] or t["recompiles"]]
    if tests:
        out += ["## Per test", ""]
        for t in tests:
            c = t["counts"]
            out.append(f"- `{cell(t['nodeid'])}` ({t['outcome'] or '?'}): {_plural(c['graphs'], 'graph')}, "
                       f"{_plural(len(t['graph_breaks']), 'graph break')}, {_plural(c['recompiles'], 'recompile')}")
            for b in t["graph_breaks"]:
                out.append(f"  - {b['break_id']} at `{cell(b['where'])}`: {cell(b['message'])}")
            for r in t["recompiles"]:
                out.append(f"  - recompile of `{cell(r['frame'])}`: {cell(r['reasons'][0] if r['reasons'] else '?')}")
        out.append("")
    return "\n".join(out)


_CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222}
table{border-collapse:collapse;width:100%}th,td{border:1px solid #ccc;padding:4px 8px;vertical-align:top}
th{background:#eee;text-align:left}td.n{text-align:right}code{font-size:90%}
tr.code td.cause{color:#a40}tr.dynamo_lite td.cause{color:#05a}details{margin:2px 0}pre{margin:2px 0}"""


def render_html(report: dict) -> str:
    """The report as one self-contained HTML page (every group, with its user stack and tests)."""
    e = html.escape
    out = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>dynamo_lite graph breaks</title>",
           f"<style>{_CSS}</style></head><body>", "<h1>dynamo_lite graph breaks</h1>",
           f"<p>{e(_totals_text(report))}</p>"]
    if report.get("attribution"):
        out.append(f"<p>{e(report['attribution'])}</p>")
    groups = report.get("break_types", [])
    if groups:
        out.append("<table><tr><th>count</th><th>tests</th><th>cause</th><th>location</th><th>break</th>"
                   "<th>what happened</th><th>hint</th></tr>")
        for g in groups:
            stack = "\n".join(f"{f['filename']}:{f['lineno']} in {f['name']}\n    {f['line']}"
                              for f in g.get("user_code_stack") or [])
            inside = f"<br><small>inside {e(g['in_library'])}</small>" if g.get("in_library") else ""
            details = (f"<details><summary>stack and tests</summary><pre>{e(stack)}</pre>"
                       f"<pre>{e(chr(10).join(g['tests']))}</pre></details>")
            out.append(f"<tr class='{e(g['cause'])}'><td class='n'>{g['count']}</td><td class='n'>{len(g['tests'])}"
                       f"</td><td class='cause'>{e(CAUSE_LABELS.get(g['cause'], g['cause']))}</td>"
                       f"<td><code>{e(g['location'])}</code>{inside}</td><td>{e(g['break_id'])} {e(g['title'])}</td>"
                       f"<td>{e(g['message'])}{details}</td><td>{e(g['hints'][0]) if g['hints'] else ''}</td></tr>")
        out.append("</table>")
    tests = [t for t in report.get("tests", []) if t["graph_breaks"] or t["recompiles"]]
    if tests:
        out.append("<h2>Per test</h2><ul>")
        for t in tests:
            c = t["counts"]
            items = "".join(f"<li>{e(b['break_id'])} at <code>{e(b['where'])}</code>: {e(b['message'])}</li>"
                            for b in t["graph_breaks"])
            items += "".join(f"<li>recompile of <code>{e(r['frame'])}</code>: "
                             f"{e(r['reasons'][0] if r['reasons'] else '?')}</li>" for r in t["recompiles"])
            out.append(f"<li><code>{e(t['nodeid'])}</code> ({e(t['outcome'] or '?')}): "
                       f"{_plural(c['graphs'], 'graph')}, {_plural(len(t['graph_breaks']), 'graph break')}, "
                       f"{_plural(c['recompiles'], 'recompile')}<ul>{items}</ul></li>")
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
