# Type stub of the C extension (csrc/): its names are dynamo_lite's internals, used by the
# modules of the package only; the public API (dynamo_lite/__init__.py) is typed in Python.
from typing import Any

def __getattr__(name: str) -> Any: ...
