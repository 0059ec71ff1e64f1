"""Run a Python script or module with torch.compile going to dynamo_lite (use_as_torch_compile).

    python -m dynamo_lite.run script.py [args...]
    python -m dynamo_lite.run -m package.module [args...]

The script runs as ``__main__`` with ``sys.argv`` and ``sys.path[0]`` as ``python script.py``
(or ``python -m package.module``) would give it, after ``dynamo_lite.use_as_torch_compile()``;
``DYNAMO_LITE_AS_TORCH_COMPILE=1`` is set for the processes it starts (they switch too when the
package's .pth file is installed: dynamo_lite/torch_compile_switch.py).  ``main(argv)`` is the
entry point and returns an exit code.
Tested by tests/api/test_use_as_torch_compile.py.
"""
from __future__ import annotations

import os
import runpy
import sys
from typing import Optional

from .torch_compile_switch import ENV_VAR, use_as_torch_compile

_USAGE = "usage: python -m dynamo_lite.run script.py [args...] | -m module [args...]"


def main(argv: Optional[list[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n")[0] + "\n\n" + _USAGE, file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    module = None
    if args[0] == "-m":
        if len(args) < 2:
            print(_USAGE, file=sys.stderr)
            return 2
        module, args = args[1], args[1:]
    os.environ[ENV_VAR] = "1"
    use_as_torch_compile(True)
    sys.argv = args
    if module is not None:
        sys.path.insert(0, os.getcwd())  # as `python -m` does
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))  # as `python script.py` does
        runpy.run_path(args[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
