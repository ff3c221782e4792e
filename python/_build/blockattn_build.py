"""A PEP 517 build backend for the blockattn package that needs nothing else.

The package is pure Python around a prebuilt shared library (the CMake build's
libblockattn.so), so building a wheel is zipping files: no compiler, no
setuptools, no wheel package, no network. `pip install ./python` and
`pip wheel ./python` therefore work offline, with or without build isolation.

The library is taken from $BLOCKATTN_BUILD_DIR, else <repo>/build, with the
optional torch fast-path module (_ext.*.so) when that build made one.
"""

import base64
import hashlib
import os
import re
import sysconfig
import zipfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # python/
REPO_ROOT = PACKAGE_DIR.parent
LIBRARY_NAME = "libblockattn.so"


def _project() -> dict:
    """name, version, summary and requires-python, from pyproject.toml and __init__.py."""
    text = (PACKAGE_DIR / "pyproject.toml").read_text()
    project = text[text.index("[project]"):]

    def field(key: str) -> str:
        match = re.search(rf'^{key}\s*=\s*"([^"]*)"', project, re.MULTILINE)
        if not match:
            raise RuntimeError(f"pyproject.toml: [project] has no {key}")
        return match.group(1)

    init = (PACKAGE_DIR / "blockattn" / "__init__.py").read_text()
    version = re.search(r'^__version__\s*=\s*"([^"]+)"', init, re.MULTILINE).group(1)
    return {
        "name": field("name"),
        "version": version,
        "summary": field("description"),
        "requires_python": field("requires-python"),
    }


def _library() -> Path:
    build_dir = Path(os.environ.get("BLOCKATTN_BUILD_DIR", REPO_ROOT / "build"))
    library = build_dir / LIBRARY_NAME
    if not library.is_file():
        raise RuntimeError(
            f"blockattn: {library} does not exist. Build the C library first:\n"
            "  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build\n"
            "or point BLOCKATTN_BUILD_DIR at the directory holding libblockattn.so."
        )
    return library.resolve()  # the versioned file behind the symlink


def _platform_tag() -> str:
    return re.sub(r"[-.]", "_", sysconfig.get_platform())


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _files() -> list[tuple[str, bytes]]:
    package = PACKAGE_DIR / "blockattn"
    files = [
        (f"blockattn/{path.relative_to(package).as_posix()}", path.read_bytes())
        for path in sorted(package.rglob("*.py"))
        if "__pycache__" not in path.parts
    ]
    library = _library()
    files.append((f"blockattn/{LIBRARY_NAME}", library.read_bytes()))
    # The optional compiled fast path (blockattn._fast), when the build made one.
    files += [(f"blockattn/{path.name}", path.read_bytes()) for path in sorted(library.parent.glob("_ext.*.so"))]
    return files


def _metadata(meta: dict) -> str:
    return (
        "Metadata-Version: 2.1\n"
        f"Name: {meta['name']}\n"
        f"Version: {meta['version']}\n"
        f"Summary: {meta['summary']}\n"
        f"Requires-Python: {meta['requires_python']}\n"
    )


def _dist_info(meta: dict) -> str:
    return f"{meta['name']}-{meta['version']}.dist-info"


# --------------------------------------------------------------------------- #
# PEP 517 hooks
# --------------------------------------------------------------------------- #


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    meta = _project()
    dist_info = Path(metadata_directory) / _dist_info(meta)
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata(meta))
    return dist_info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    meta = _project()
    tag = f"py3-none-{_platform_tag()}"
    name = f"{meta['name']}-{meta['version']}-{tag}.whl"
    dist_info = _dist_info(meta)
    files = _files() + [
        (f"{dist_info}/METADATA", _metadata(meta).encode()),
        (
            f"{dist_info}/WHEEL",
            f"Wheel-Version: 1.0\nGenerator: blockattn_build\nRoot-Is-Purelib: false\nTag: {tag}\n".encode(),
        ),
    ]
    record = [_record_line(arcname, data) for arcname, data in files] + [f"{dist_info}/RECORD,,"]
    with zipfile.ZipFile(Path(wheel_directory) / name, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if arcname.endswith(".so") else 0o644) << 16
            wheel.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
        wheel.writestr(f"{dist_info}/RECORD", "\n".join(record) + "\n")
    return name
