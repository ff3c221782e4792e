"""Packages the prebuilt C library with the pure-Python front end.

The CMake build produces build/libblockattn.so; this copies it into the
package at install time, so nothing here compiles and nothing needs a network:

    cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build
    pip install --no-build-isolation ./python

BLOCKATTN_BUILD_DIR overrides where the library is taken from.
"""

import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

LIBRARY_NAME = "libblockattn.so"
REPO_ROOT = Path(__file__).resolve().parent.parent


def _prebuilt_library() -> Path:
    build_dir = Path(os.environ.get("BLOCKATTN_BUILD_DIR", REPO_ROOT / "build"))
    library = build_dir / LIBRARY_NAME
    if not library.is_file():
        raise SystemExit(
            f"blockattn: {library} does not exist. Build the C library first:\n"
            "  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build\n"
            "or point BLOCKATTN_BUILD_DIR at the directory holding libblockattn.so."
        )
    return library


class BuildPyWithLibrary(build_py):
    """build_py that also drops the prebuilt shared library into the package."""

    def run(self):
        super().run()
        target = Path(self.build_lib) / "blockattn" / LIBRARY_NAME
        self.mkpath(str(target.parent))
        self.copy_file(str(_prebuilt_library()), str(target))


class BinaryDistribution(Distribution):
    """The wheel carries a native library, so tag it for this platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
