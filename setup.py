"""Build the C core of dynamo_lite.

Only the extensions live here; all metadata is in pyproject.toml.
csrc/eval_frame.c, csrc/cache_entry.c, csrc/call_scope.c and csrc/guards.c
(with csrc/cpython_compat.h) become dynamo_lite._C: plain C, no torch
dependency.
csrc/tensor_meta.cpp becomes the optional dynamo_lite._tensor_meta (fast
tensor guards; built only when torch is importable at build time, e.g.
`python setup.py build_ext --inplace` or `pip install --no-build-isolation`;
without it guards read tensor metadata through Python attributes).
"""
import os

from setuptools import Extension, setup

extensions = [
    Extension(
        "dynamo_lite._C",
        sources=["csrc/eval_frame.c", "csrc/cache_entry.c", "csrc/call_scope.c", "csrc/guards.c"],
        depends=["csrc/cpython_compat.h", "csrc/eval_frame.h", "csrc/cache_entry.h", "csrc/guards.h",
                 "csrc/tensor_meta.h"],
        include_dirs=["csrc"],
        extra_compile_args=["-O2", "-Wall"],
    )
]

try:
    import torch
    from torch.utils.cpp_extension import include_paths
except ImportError:  # no torch in the build environment: the optional extension is skipped
    torch = None

if torch is not None:
    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    extensions.append(
        Extension(
            "dynamo_lite._tensor_meta",
            sources=["csrc/tensor_meta.cpp"],
            depends=["csrc/tensor_meta.h"],
            include_dirs=["csrc", *include_paths()],
            library_dirs=[torch_lib],
            runtime_library_dirs=[torch_lib],
            libraries=["c10"],
            extra_compile_args=["-O2", "-std=c++17", "-w",
                                f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"],
            language="c++",
            optional=True,
        )
    )

setup(ext_modules=extensions)
