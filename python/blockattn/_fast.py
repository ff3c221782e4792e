"""Loads blockattn._ext, the compiled eager fast path (python/csrc/fast_path.cpp).

The module is optional: the CMake build makes it where PyTorch's headers were
found, next to libblockattn.so, for that torch version. It is used only when
it was built against the running torch; otherwise, or
with BLOCKATTN_NO_EXTENSION=1, MODULE is None and every call takes ops.py's
ctypes route (WHY_NOT says why).
"""

import importlib.machinery
import importlib.util
import os

import torch

from blockattn import _lib

MODULE = None
WHY_NOT = ""


def _load():
    if os.environ.get("BLOCKATTN_NO_EXTENSION", "") not in ("", "0"):
        return None, "disabled by BLOCKATTN_NO_EXTENSION"
    directory = _lib.LIBRARY_PATH.parent
    candidates = [directory / f"_ext{suffix}" for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        return None, f"not built (no _ext module beside {_lib.LIBRARY_PATH})"
    spec = importlib.util.spec_from_file_location("blockattn._ext", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # e.g. built against another torch
        return None, f"{path} did not load: {exc}"
    if module.torch_version != torch.__version__:
        return None, f"{path} was built for torch {module.torch_version}, this is {torch.__version__}"
    return module, ""


MODULE, WHY_NOT = _load()
