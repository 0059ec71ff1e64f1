"""Run the code examples of docs/*.md, and keep their printed output honest.

Markers (HTML comments: invisible in the built site) placed on the line just
before a fenced block:

    <!-- test: run -->       the next ```python block is executed; the blocks of
                             one page share a namespace and run in order
    <!-- test: output -->    the next ```text block is what the previous `run`
                             block printed (stdout and stderr), compared after
                             normalising addresses, timestamps and frame ids
    <!-- test: output on 3.13 -->
                             what it prints on that Python when that differs (a
                             bytecode detail shown in a log); an `output` block
                             right before it is then checked on the other versions

    python tools/doc_examples.py            check every page (exit 1 on a mismatch)
    python tools/doc_examples.py --update   rewrite the output blocks from a real run

The code of a page is compiled as the file ``example.py`` (its lines are
registered in linecache, numbered across the page's run blocks), so graphs and
break reports print ``example.py:<line>``.
tests/api/test_docs.py runs every page through ``run_page``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import linecache
import logging
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
RUN = "<!-- test: run -->"
OUTPUT = "<!-- test: output -->"
_OUTPUT_ON = re.compile(r"<!-- test: output on (3\.\d+) -->")
PY_VERSION = "%d.%d" % sys.version_info[:2]
EXAMPLE_FILE = "example.py"


@dataclasses.dataclass
class Block:
    kind: str  # "run" or "output"
    start: int  # index of the first content line (after the opening fence)
    end: int  # index of the closing fence
    text: str  # content
    python: str = ""  # "3.13": an output block for that Python only ("": any)


def find_blocks(lines: list[str]) -> list[Block]:
    blocks = []
    i = 0
    while i < len(lines):
        marker = lines[i].strip()
        on = _OUTPUT_ON.fullmatch(marker)
        if marker in (RUN, OUTPUT) or on:
            kind = "run" if marker == RUN else "output"
            fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
            want = "```python" if kind == "run" else "```text"
            if fence != want:
                raise ValueError(f"line {i + 2}: {marker} must be followed by {want}, got {fence!r}")
            j = i + 2
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            if j == len(lines):
                raise ValueError(f"line {i + 2}: unclosed code block")
            blocks.append(Block(kind, i + 2, j, "\n".join(lines[i + 2:j]), on.group(1) if on else ""))
            i = j
        i += 1
    return blocks


_NORMALISE = [
    # temporary directories first: a random name may hold "0x" and a hex digit (tmp420x5i5g)
    (re.compile(r"/tmp/[\w.-]+/"), "/tmp/…/"),
    (re.compile(r"\b0x[0-9a-fA-F]+"), "0x…"),
    (re.compile(r"^[IDWE]\d{4} \d\d:\d\d:\d\d\.\d{3} ", re.M), "L "),  # log line prefix
    (re.compile(r"\[\d+/(\d+)\]"), r"[N/\1]"),  # frame ids depend on what ran before
    (re.compile(r"\bgraph \d+/(\d+)\b"), r"graph N/\1"),  # (also in messages naming a graph)
    (re.compile(r" in \d+\.\d+s\b"), " in …s"),  # pytest's run time
    (re.compile(r"[ \t]+$", re.M), ""),
]


def normalise(text: str) -> str:
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return text.strip("\n")


class _Warnings(logging.Handler):
    """Prints dynamo_lite's warnings as a terminal does with no logging configured (logging's
    "last resort" handler), also under pytest, whose own handlers would swallow them."""

    def __init__(self, stream):
        super().__init__(logging.WARNING)
        self.stream = stream

    def emit(self, record):
        from dynamo_lite import log as dl_logging

        if not dl_logging.get_settings():  # with set_logs active, its handler prints the record
            self.stream.write(record.getMessage() + "\n")


def run_page(path: str) -> list[tuple[Block, str]]:
    """Execute the run blocks of a page; return (output block, actual output) pairs in order."""
    import dynamo_lite

    with open(path) as f:
        lines = f.read().split("\n")
    blocks = find_blocks(lines)
    namespace: dict = {"__name__": "__doc_example__"}
    page_lines: list[str] = []
    last_output = None
    results = []
    dynamo_lite.reset()
    try:
        for block in blocks:
            if block.kind == "run":
                offset = len(page_lines)
                page_lines.extend(block.text.split("\n"))
                source = [line + "\n" for line in page_lines]
                linecache.cache[EXAMPLE_FILE] = (sum(map(len, source)), None, source, EXAMPLE_FILE)
                code = compile("\n" * offset + block.text + "\n", EXAMPLE_FILE, "exec")
                buf = io.StringIO()
                warnings_handler = _Warnings(buf)
                logging.getLogger("dynamo_lite").addHandler(warnings_handler)
                with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                    try:
                        exec(code, namespace)  # noqa: S102 - our own docs
                    except BaseException as e:
                        raise AssertionError(f"{os.path.relpath(path, ROOT)} line {block.start}: the example "
                                             f"raised {type(e).__name__}: {e}\n--- output so far:\n"
                                             f"{buf.getvalue()}") from e
                    finally:
                        logging.getLogger("dynamo_lite").removeHandler(warnings_handler)
                last_output = buf.getvalue()
            else:
                if last_output is None:
                    raise ValueError(f"{path} line {block.start}: output block before any run block")
                if block.python and block.python != PY_VERSION:
                    continue  # another Python's output
                if block.python and results and results[-1][1] is last_output and not results[-1][0].python:
                    results.pop()  # this Python's own block replaces the general one before it
                results.append((block, last_output))
    finally:
        linecache.cache.pop(EXAMPLE_FILE, None)
        dynamo_lite.set_logs()
        dynamo_lite.reset()
    return results


def check_page(path: str) -> list[str]:
    """Mismatches between the page's output blocks and a real run (empty when honest)."""
    problems = []
    for block, actual in run_page(path):
        if normalise(block.text) != normalise(actual):
            problems.append(f"{os.path.relpath(path, ROOT)} line {block.start}: output block differs from a real "
                            f"run (python tools/doc_examples.py --update rewrites it)\n--- documented:\n"
                            f"{block.text}\n--- actual:\n{actual}")
    return problems


def update_page(path: str) -> bool:
    with open(path) as f:
        lines = f.read().split("\n")
    results = run_page(path)
    changed = False
    for block, actual in reversed(results):  # from the end, so earlier indices stay valid
        if normalise(block.text) == normalise(actual):
            continue
        lines[block.start:block.end] = actual.rstrip("\n").split("\n")
        changed = True
    if changed:
        with open(path, "w") as f:
            f.write("\n".join(lines))
    return changed


def pages() -> list[str]:
    return sorted(os.path.join(DOCS, name) for name in os.listdir(DOCS) if name.endswith(".md"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="rewrite output blocks from a real run")
    parser.add_argument("pages", nargs="*", help="pages to process (default: every docs/*.md)")
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    status = 0
    for path in [os.path.abspath(p) for p in args.pages] or pages():
        if args.update:
            if update_page(path):
                print(f"updated {os.path.relpath(path, ROOT)}")
        else:
            for problem in check_page(path):
                print(problem, file=sys.stderr)
                status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
