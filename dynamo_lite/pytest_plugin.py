"""The dynamo_lite pytest plugin (entry point ``pytest11``; disable with ``-p no:dynamo_lite``).

Records the structured events (graph breaks, fallbacks, recompiles, graphs)
of code compiled inside each test and prints a "dynamo_lite graph breaks"
summary at the end of the run.
Tested by tests/test_pytest_plugin.py.
"""
from __future__ import annotations

import collections

import pytest

from .report import events


class _Recorder:
    def __init__(self):
        self.by_test: dict[str, list] = collections.defaultdict(list)
        self.current: str = ""

    def __call__(self, event):
        self.by_test[self.current].append(event)


_RECORDER = _Recorder()


def pytest_configure(config):
    events.add_sink(_RECORDER)


def pytest_unconfigure(config):
    events.remove_sink(_RECORDER)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    _RECORDER.current = item.nodeid
    yield
    _RECORDER.current = ""


def pytest_terminal_summary(terminalreporter):
    breaks = collections.Counter()
    for test, evs in _RECORDER.by_test.items():
        for ev in evs:
            if isinstance(ev, (events.GraphBreakEvent, events.FallbackEvent)):
                where = f"{ev.filename}:{ev.lineno}" if ev.filename else ev.frame
                breaks[(ev.break_id, ev.reason, where)] += 1
    if not breaks:
        return
    tr = terminalreporter
    tr.write_sep("=", "dynamo_lite graph breaks")
    for (bid, reason, where), n in breaks.most_common(20):
        tr.write_line(f"{n:5d}  [{bid}] {reason}  ({where})")
