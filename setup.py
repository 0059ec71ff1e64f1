"""Build the C core of dynamo_lite.

Only the extensions live here; all metadata is in pyproject.toml.
csrc/eval_frame.c, csrc/cache_entry.c, csrc/call_scope.c and csrc/guards.c
(with csrc/cpython_compat.h) become dynamo_lite._C: plain C, no torch
dependency.
csrc/tensor_meta.cpp becomes the optional dynamo_lite._tensor_meta (fast
tensor guards; built only when torch is importable at build time, e.g.
`python setup.py build_ext --inplace` or `pip install --no-build-isolation`;
without it guards read tensor metadata through Python attributes). Its file
name carries the version of the torch it was built against
(`_tensor_meta.torch2_15_0_cpu.cpython-311-....so`: not a module name
the import system or pkgutil would pick up): builds for several
torch versions sit side by side, and dynamo_lite loads only the one of the
running torch (dynamo_lite/torch_compat.py, guards/tensor_api.py).

dynamo_lite/dynamo_lite_as_torch_compile.pth is also installed beside the
package, in site-packages, by a wheel (BuildPy below), so
DYNAMO_LITE_AS_TORCH_COMPILE=1 works in a process that never imports
dynamo_lite (dynamo_lite/torch_compile_switch.py).  An editable install does not
get it (setuptools builds its wheel by internals we do not override): there
``python -m dynamo_lite.run script.py`` does the same.
"""
import os
import re

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

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
            libraries=["c10", "torch_cpu"],
            extra_compile_args=["-O2", "-std=c++20", "-w",  # (torch 2.15 headers need C++20; torch builds with it)
                                f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"],
            language="c++",
            optional=True,
        )
    )


class BuildExt(build_ext):
    """Names _tensor_meta's file after the torch it is built against (the rule of
    dynamo_lite.torch_compat.torch_build_tag)."""

    def get_ext_filename(self, fullname):
        filename = super().get_ext_filename(fullname)
        if fullname.rsplit(".", 1)[-1] == "_tensor_meta" and torch is not None:  # (distutils passes the last part)
            head, tail = os.path.split(filename)
            tag = "torch" + re.sub(r"[^0-9A-Za-z]+", "_", torch.__version__)
            filename = os.path.join(head, tail.replace("_tensor_meta", f"_tensor_meta.{tag}", 1))
        return filename


PTH = os.path.join("dynamo_lite", "dynamo_lite_as_torch_compile.pth")


class BuildPy(build_py):
    """Also puts the .pth file at the top of the build (the wheel's root: site-packages)."""

    def run(self):
        super().run()
        self.copy_file(PTH, os.path.join(self.build_lib, os.path.basename(PTH)), preserve_mode=0)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, os.path.basename(PTH))]


cmdclass = {"build_ext": BuildExt, "build_py": BuildPy}

setup(ext_modules=extensions, cmdclass=cmdclass)
