"""pytest setup for the blockattn Python tests.

Runs against an installed blockattn if there is one, else against the source
tree (python/ on sys.path, library from build/ or BLOCKATTN_LIBRARY).
"""

import importlib.util
import sys
import zlib
from pathlib import Path

import pytest

if importlib.util.find_spec("blockattn") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))


@pytest.fixture(autouse=True)
def _seed_per_test(request):
    """Fresh but reproducible random inputs: every test gets its own seed, derived from its id."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))
