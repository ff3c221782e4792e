"""DistributedDataParallel training with blockattn on 2 GPUs (tests/python/ddp_train.py)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs at least 2 CUDA devices")
def test_ddp_matches_single_gpu():
    script = Path(__file__).with_name("ddp_train.py")
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    print(result.stdout[-4000:], result.stderr[-4000:])
    assert result.returncode == 0, result.stderr[-4000:]
    assert "ddp vs single GPU" in result.stdout and ": ok" in result.stdout
