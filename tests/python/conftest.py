"""pytest setup for the blockattn Python tests.

Runs against an installed blockattn if there is one, else against the source
tree (python/ on sys.path, library from build/ or BLOCKATTN_LIBRARY).
"""

import importlib.util
import os
import sys
import zlib
from pathlib import Path

import pytest

if importlib.util.find_spec("blockattn") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))


@pytest.fixture(autouse=True)
def _seed_per_test(request):
    """Reproducible random inputs: every test's seed is derived from its id and
    BLOCKATTN_TEST_SEED (default 0; set another value for fresh inputs). The
    seed is printed, so a failure's captured output says how to rerun it."""
    torch = pytest.importorskip("torch")
    base = int(os.environ.get("BLOCKATTN_TEST_SEED", "0"))
    seed = zlib.crc32(request.node.nodeid.encode()) ^ base
    print(f"[seed] BLOCKATTN_TEST_SEED={base} -> torch.manual_seed({seed})")
    torch.manual_seed(seed)
