"""Builds the Python wheel offline and checks what is in it, without torch:

    python3 tests/package/check_wheel.py <build dir>

`pip wheel ./python` must work with no package index (the in-tree backend
needs nothing), the wheel must hold the Python sources and libblockattn.so,
and that library must load (ctypes) and report the package's version and C ABI.
"""

import ctypes
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    build_dir = Path(sys.argv[1]).resolve()
    env = dict(os.environ, PIP_NO_INDEX="1", BLOCKATTN_BUILD_DIR=str(build_dir), PIP_DISABLE_PIP_VERSION_CHECK="1")
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", tmp, str(ROOT / "python")],
            check=True,
            env=env,
            cwd=tmp,
        )
        wheels = list(Path(tmp).glob("blockattn-*.whl"))
        if len(wheels) != 1:
            print(f"expected one wheel, found {wheels}")
            return 1
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = set(wheel.namelist())
            needed_files = (
                "blockattn/__init__.py",
                "blockattn/ops.py",
                "blockattn/layer.py",
                "blockattn/nn/__init__.py",
                "blockattn/_lib.py",
                "blockattn/libblockattn.so",
            )
            for needed in needed_files:
                if needed not in names:
                    print(f"{wheels[0].name} lacks {needed}")
                    return 1
            wheel.extractall(tmp)
        lib = ctypes.CDLL(str(Path(tmp) / "blockattn" / "libblockattn.so"))
        lib.blockattn_version.restype = ctypes.c_char_p
        lib.blockattn_config_count.restype = ctypes.c_size_t
        init = (ROOT / "python" / "blockattn" / "__init__.py").read_text()
        package_version = re.search(r'__version__ = "([^"]+)"', init).group(1)
        lib_abi = re.search(r"^ABI_VERSION = (\d+)", (ROOT / "python/blockattn/_lib.py").read_text(), re.M).group(1)
        checks = {
            "library version == package version": lib.blockattn_version().decode() == package_version,
            "library C ABI == the package's": lib.blockattn_abi_version() == int(lib_abi),
            "kernel table not empty": lib.blockattn_config_count() > 0,
        }
        for what, ok in checks.items():
            print(f"{'ok  ' if ok else 'FAIL'} {what}")
        print(f"built {wheels[0].name} offline")
        return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
