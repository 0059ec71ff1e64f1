"""The shape of the package, checked: layer contracts (import-linter), few lazy imports, every
folder a package, no test file named by history, every "Tested by" pointer names a real file.

These are the rules of docs/contributing.md; a failure here names what to move or fix.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "dynamo_lite")
MAX_LAZY_IMPORTS = 16  # 16 today (the issue allowed 60): a new one is a design decision


def _py_files(top):
    for dirpath, dirnames, files in os.walk(top):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(dirpath, name)


def test_layer_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts: layers import only downwards."""
    proc = subprocess.run([sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
                           "sys.exit(lint_imports())"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def _lazy_own_imports():
    """(file, line, has_reason) for every import of our own modules inside a function."""
    out = []
    for path in _py_files(PKG):
        text = open(path).read()
        lines = text.splitlines()
        for fn in ast.walk(ast.parse(text)):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                own = (isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("dynamo_lite"))
                       or isinstance(node, ast.Import) and any(a.name.startswith("dynamo_lite") for a in node.names))
                if own:
                    here = lines[node.lineno - 1] + " " + lines[node.lineno - 2]
                    out.append((os.path.relpath(path, ROOT), node.lineno, "lazy:" in here))
    return sorted(set(out))


def test_few_function_level_imports_each_with_a_reason():
    lazy = _lazy_own_imports()
    assert len(lazy) <= MAX_LAZY_IMPORTS, f"{len(lazy)} function-level imports of our own modules"
    unexplained = [f"{f}:{n}" for f, n, why in lazy if not why]
    assert not unexplained, "function-level imports need a `# lazy: <reason>` comment: " + ", ".join(unexplained)


def test_every_package_folder_has_an_init():
    missing = [os.path.relpath(d, ROOT) for d, dirs, files in os.walk(PKG)
               if "__pycache__" not in d and any(f.endswith(".py") for f in files) and "__init__.py" not in files]
    assert not missing, f"folders without __init__.py: {missing}"


def test_no_test_file_is_named_by_history():
    bad = [os.path.relpath(p, ROOT) for p in _py_files(os.path.join(ROOT, "tests"))
           if re.search(r"(acceptance_\w*|\w+\d|_fixes|_misc|_new|_old)\.py$", os.path.basename(p))]
    assert not bad, f"name test files by subject: {bad}"


def test_tested_by_pointers_name_existing_files():
    dangling = []
    for path in _py_files(PKG):
        doc = ast.get_docstring(ast.parse(open(path).read())) or ""
        for ref in re.findall(r"tests/[\w/.]+?\.py", doc):
            if not os.path.exists(os.path.join(ROOT, ref)):
                dangling.append(f"{os.path.relpath(path, ROOT)} -> {ref}")
    assert not dangling, "docstrings point at missing test files: " + "; ".join(dangling)
