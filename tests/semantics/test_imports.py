"""`import` statements inside compiled functions: modules already imported are read without a
break; an import that would run module code (a module or a package's submodule not yet imported)
breaks and runs in Python, with Python's effects (sys.modules, the package attribute).
"""
from __future__ import annotations

import sys

import torch

import dynamo_lite
from dynamo_lite.testing import assert_same, check_breaks, event_kinds, recording


def _forget(package: str, sub: str) -> None:
    """Make ``package.sub`` look never imported: gone from sys.modules and from the package."""
    for name in [k for k in sys.modules if k == f"{package}.{sub}" or k.startswith(f"{package}.{sub}.")]:
        del sys.modules[name]
    pkg = sys.modules[package]
    if hasattr(pkg, sub):
        delattr(pkg, sub)


def test_from_package_import_submodule_not_imported_yet_runs_the_import():
    import email

    def f(x):
        from email import mime
        return x + 1, mime.__name__

    _forget("email", "mime")
    eager = f(torch.ones(2))
    _forget("email", "mime")  # the compiled call must run the import itself
    seen, collecting = recording()
    with collecting:
        compiled = dynamo_lite.compile(f)(torch.ones(2))
    assert_same(compiled, eager)
    assert "email.mime" in sys.modules and email.mime is sys.modules["email.mime"]
    assert event_kinds(seen).count("GraphBreakEvent") == 1


def test_from_package_import_submodule_in_sys_modules_but_not_an_attribute():
    import xml.dom.minidom  # noqa: F401  (in sys.modules)

    def f(x):
        from xml.dom import minidom
        return x * 2, minidom.__name__

    minidom = sys.modules["xml.dom.minidom"]
    delattr(sys.modules["xml.dom"], "minidom")  # Python finds it in sys.modules all the same
    try:
        check_breaks(f, torch.ones(2), breaks=0, raises=None)
    finally:
        sys.modules["xml.dom"].minidom = minidom


def test_import_of_loaded_modules_does_not_break():
    def f(x):
        import math
        import os.path as osp
        from collections import OrderedDict
        return x * math.pi, osp.sep, OrderedDict(a=1)["a"]

    check_breaks(f, torch.ones(2), breaks=0, raises=None)


def test_from_import_of_a_missing_name_raises_import_error_like_python():
    def f(x):
        y = x + 1
        from collections import no_such_name  # noqa: F401
        return y

    check_breaks(f, torch.ones(2), breaks=None, raises=ImportError)


def test_relative_imports_of_modules_already_imported_are_read_without_a_break(tmp_path, monkeypatch):
    pkg = tmp_path / "dl_relpkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("SCALE = 3\n")
    (pkg / "helpers.py").write_text("def double(x):\n    return x * 2\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "model.py").write_text(
        "def f(x):\n"
        "    from ..helpers import double\n"
        "    from .. import SCALE\n"
        "    from . import model as me\n"
        "    return double(x) * SCALE + me.OFFSET\n"
        "OFFSET = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    model = importlib.import_module("dl_relpkg.sub.model")
    importlib.import_module("dl_relpkg.helpers")
    try:
        check_breaks(model.f, torch.ones(2), breaks=0)
    finally:
        for name in [k for k in sys.modules if k.startswith("dl_relpkg")]:
            del sys.modules[name]
