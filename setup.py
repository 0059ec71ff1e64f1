"""Build the C core of dynamo_lite.

Only the extension lives here; all metadata is in pyproject.toml.
csrc/eval_frame.c (with csrc/cpython_compat.h) becomes dynamo_lite._C.
"""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dynamo_lite._C",
            sources=["csrc/eval_frame.c"],
            depends=["csrc/cpython_compat.h"],
            include_dirs=["csrc"],
            extra_compile_args=["-O2", "-Wall"],
        )
    ],
)
