"""ctypes binding of the blockattn C ABI (include/blockattn/blockattn_c.h).

The package binds to the C ABI instead of PyTorch's C++ ABI so that one build
of libblockattn.so serves every torch version. The structs below mirror the
header field for field; ctypes lays them out with the platform's C rules.
"""

import ctypes
import os
import struct
import threading
from pathlib import Path

# torch before libblockattn.so: loaded first, the library's CUDA runtime made
# `import torch` crash (SIGSEGV) in `python -m blockattn`, the one entry that
# imports this module before torch.
import torch  # noqa: F401  isort: skip

ABI_VERSION = 4
LIBRARY_NAME = "libblockattn.so"

# blockattn_status values.
OK = 0
STATUS_NAMES = {0: "OK", 1: "INVALID_ARGUMENT", 2: "UNSUPPORTED", 3: "CUDA_ERROR"}

# blockattn_args.dtype and .backend values, blockattn_config.operation values.
DTYPE_BF16 = 0
DTYPE_FP16 = 1
BACKEND_AUTO = 0
BACKEND_NAMES = {0: "auto", 1: "portable", 2: "hopper"}
DTYPE_NAMES = {DTYPE_BF16: "bf16", DTYPE_FP16: "fp16"}
OPERATION_NAMES = {0: "forward", 1: "backward"}
# blockattn_args.rotary_* values.
ROTARY_INTERLEAVED, ROTARY_HALF_SPLIT = 0, 1
ROTARY_TOKEN_ROW, ROTARY_IN_SEQUENCE = 0, 1
TABLE_FLOAT32, TABLE_BF16, TABLE_FP16 = 0, 1, 2


class TensorView(ctypes.Structure):
    """blockattn_tensor: element (t, h, d) at data + t*token_stride + h*head_stride + d."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("token_stride", ctypes.c_int64),
        ("head_stride", ctypes.c_int64),
    ]


class Args(ctypes.Structure):
    """blockattn_args (version 3); struct_size is set by the constructor."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("num_seqs", ctypes.c_int64),
        ("total_tokens", ctypes.c_int64),
        ("num_q_heads", ctypes.c_int32),
        ("num_kv_heads", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("block_size", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float),
        ("backend", ctypes.c_int32),
        ("offsets", ctypes.c_void_p),
        ("q", TensorView),
        ("k", TensorView),
        ("v", TensorView),
        ("out", TensorView),
        ("dout", TensorView),
        ("dq", TensorView),
        ("dk", TensorView),
        ("dv", TensorView),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("stream", ctypes.c_void_p),
        ("reuse_schedule", ctypes.c_int32),
        ("rotary_dim", ctypes.c_int32),
        ("rotary_pairs", ctypes.c_int32),
        ("rotary_positions", ctypes.c_int32),
        ("rotary_rotate_v", ctypes.c_int32),
        ("rotary_table_type", ctypes.c_int32),
        ("rotary_cos", ctypes.c_void_p),
        ("rotary_sin", ctypes.c_void_p),
        ("rotary_cos_row_stride", ctypes.c_int64),
        ("rotary_sin_row_stride", ctypes.c_int64),
        ("rotary_num_positions", ctypes.c_int64),
        ("rotary_seq_start", ctypes.c_void_p),
    ]

    def __init__(self, **fields):
        super().__init__(struct_size=ctypes.sizeof(Args), **fields)


# The tensor fields of blockattn_args, in order.
TENSOR_FIELDS = ("q", "k", "v", "out", "dout", "dq", "dk", "dv")


def _args_packer() -> struct.Struct:
    """A struct.Struct writing blockattn_args in the layout ctypes computed for
    Args (its field offsets and padding), so the per-call packing is one call
    instead of building a ctypes object field by field."""
    codes = {ctypes.c_size_t: "Q", ctypes.c_int64: "q", ctypes.c_int32: "i", ctypes.c_float: "f", ctypes.c_void_p: "Q"}
    fmt, pos = "<", 0
    for name, ctype in Args._fields_:
        offset = getattr(Args, name).offset
        fmt += "x" * (offset - pos)
        fmt += "Qqq" if ctype is TensorView else codes[ctype]
        pos = offset + ctypes.sizeof(ctype)
    packer = struct.Struct(fmt + "x" * (ctypes.sizeof(Args) - pos))
    assert packer.size == ctypes.sizeof(Args)
    return packer


_PACKER = _args_packer()
_ARGS_SIZE = ctypes.sizeof(Args)
_per_thread = threading.local()


_NO_ROTARY = (0,) * 11


def pack_args(num_seqs, total_tokens, num_q_heads, num_kv_heads, head_dim, dtype, block_size, scale, backend,
              offsets_ptr, tensors, workspace_ptr, workspace_bytes, stream, reuse_schedule=0, rotary=None):  # fmt: skip
    """A reference to this thread's blockattn_args, filled for one call.

    `tensors` are (q, k, v, out, dout, dq, dk, dv), torch tensors or None;
    `rotary` the 11 rotary_* field values in order, or None. The reference is
    valid until the thread's next pack_args.
    """
    args = getattr(_per_thread, "args", None)
    if args is None:
        args = _per_thread.args = Args()
        _per_thread.view = memoryview(args).cast("B")
    views = []
    for t in tensors:
        if t is None:
            views += (0, 0, 0)
        else:
            views += (t.data_ptr(), t.stride(0), t.stride(1))
    _PACKER.pack_into(
        _per_thread.view, 0, _ARGS_SIZE, num_seqs, total_tokens, num_q_heads, num_kv_heads, head_dim, dtype,
        block_size, scale, backend, offsets_ptr, *views, workspace_ptr, workspace_bytes, stream, reuse_schedule,
        *(rotary or _NO_ROTARY),
    )  # fmt: skip
    return ctypes.byref(args)


class Config(ctypes.Structure):
    """blockattn_config: one row of the library's kernel table."""

    _fields_ = [
        ("backend", ctypes.c_int32),
        ("operation", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("block_size", ctypes.c_int32),
        ("automatic", ctypes.c_int32),
    ]


class DenseTensorView(ctypes.Structure):
    """blockattn_dense_tensor: element (b, h, s, d) at data + b*batch_stride + h*head_stride + s*seq_stride + d."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("batch_stride", ctypes.c_int64),
        ("head_stride", ctypes.c_int64),
        ("seq_stride", ctypes.c_int64),
    ]


class DenseArgs(ctypes.Structure):
    """blockattn_dense_args (version 4); struct_size is set by the constructor."""

    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("batch", ctypes.c_int64),
        ("seq_len", ctypes.c_int64),
        ("num_q_heads", ctypes.c_int32),
        ("num_kv_heads", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float),
        ("backend", ctypes.c_int32),
        ("q", DenseTensorView),
        ("k", DenseTensorView),
        ("v", DenseTensorView),
        ("out", DenseTensorView),
        ("lse", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
    ]

    def __init__(self, **fields):
        super().__init__(struct_size=ctypes.sizeof(DenseArgs), **fields)


class DenseConfig(ctypes.Structure):
    """blockattn_dense_config: one row of the dense kernel table."""

    _fields_ = [
        ("backend", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("automatic", ctypes.c_int32),
    ]


def _candidate_paths() -> list[Path]:
    """Where to look, in order. An explicit BLOCKATTN_LIBRARY is the only candidate."""
    explicit = os.environ.get("BLOCKATTN_LIBRARY")
    if explicit:
        return [Path(explicit)]
    package_dir = Path(__file__).resolve().parent
    return [
        package_dir / LIBRARY_NAME,  # copied in by `pip install ./python`
        package_dir.parents[1] / "build" / LIBRARY_NAME,  # <repo>/build, for PYTHONPATH=python
    ]


def _load() -> tuple[ctypes.CDLL, Path]:
    candidates = _candidate_paths()
    for path in candidates:
        if path.is_file():
            try:
                return ctypes.CDLL(str(path)), path
            except OSError as exc:
                raise ImportError(f"blockattn: could not load {path}: {exc}") from exc
    searched = "\n  ".join(str(p) for p in candidates)
    raise ImportError(
        f"blockattn: {LIBRARY_NAME} not found. Searched:\n  {searched}\n"
        "Build it from the repository root with\n"
        "  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release && cmake --build build\n"
        "then either `pip install ./python`, or put python/ on "
        "PYTHONPATH, or set BLOCKATTN_LIBRARY to the .so's path."
    )


def _declare(lib: ctypes.CDLL) -> None:
    """Argument and return types; without them ctypes would truncate pointers to int."""
    tensor = TensorView
    lib.blockattn_abi_version.argtypes = []
    lib.blockattn_abi_version.restype = ctypes.c_int
    lib.blockattn_last_error.argtypes = []
    lib.blockattn_last_error.restype = ctypes.c_char_p
    lib.blockattn_workspace_size.argtypes = [ctypes.c_int64, ctypes.c_int64]
    lib.blockattn_workspace_size.restype = ctypes.c_size_t
    lib.blockattn_version.argtypes = []
    lib.blockattn_version.restype = ctypes.c_char_p
    lib.blockattn_tensor_alignment_bytes.argtypes = []
    lib.blockattn_tensor_alignment_bytes.restype = ctypes.c_int32
    lib.blockattn_default_block_size.argtypes = []
    lib.blockattn_default_block_size.restype = ctypes.c_int32
    lib.blockattn_config_count.argtypes = []
    lib.blockattn_config_count.restype = ctypes.c_size_t
    lib.blockattn_config_at.argtypes = [ctypes.c_size_t, ctypes.POINTER(Config)]
    lib.blockattn_config_at.restype = ctypes.c_int
    lib.blockattn_config_rotary.argtypes = [ctypes.c_size_t]
    lib.blockattn_config_rotary.restype = ctypes.c_int32
    for name in ("blockattn_forward", "blockattn_backward"):
        getattr(lib, name).argtypes = [ctypes.POINTER(Args)]
        getattr(lib, name).restype = ctypes.c_int
    for name in ("blockattn_forward_backend", "blockattn_backward_backend"):
        getattr(lib, name).argtypes = [ctypes.POINTER(Args), ctypes.POINTER(ctypes.c_int32)]
        getattr(lib, name).restype = ctypes.c_int
    lib.blockattn_dense_config_count.argtypes = []
    lib.blockattn_dense_config_count.restype = ctypes.c_size_t
    lib.blockattn_dense_config_at.argtypes = [ctypes.c_size_t, ctypes.POINTER(DenseConfig)]
    lib.blockattn_dense_config_at.restype = ctypes.c_int
    lib.blockattn_dense_forward.argtypes = [ctypes.POINTER(DenseArgs)]
    lib.blockattn_dense_forward.restype = ctypes.c_int
    lib.blockattn_dense_forward_backend.argtypes = [ctypes.POINTER(DenseArgs), ctypes.POINTER(ctypes.c_int32)]
    lib.blockattn_dense_forward_backend.restype = ctypes.c_int


_LIB, LIBRARY_PATH = _load()
_declare(_LIB)

if _LIB.blockattn_abi_version() != ABI_VERSION:
    raise ImportError(
        f"blockattn: {LIBRARY_PATH} implements C ABI version {_LIB.blockattn_abi_version()}, "
        f"this Python package needs version {ABI_VERSION}; rebuild the library or reinstall "
        "the package from the same checkout."
    )

workspace_size = _LIB.blockattn_workspace_size
forward = _LIB.blockattn_forward
backward = _LIB.blockattn_backward
forward_backend = _LIB.blockattn_forward_backend
backward_backend = _LIB.blockattn_backward_backend
dense_forward = _LIB.blockattn_dense_forward
dense_forward_backend = _LIB.blockattn_dense_forward_backend

# What the library was built with: tensors' alignment rule, the default block
# size and the kernel table. Read once here; nothing in Python repeats them.
LIBRARY_VERSION = _LIB.blockattn_version().decode()
TENSOR_ALIGNMENT_BYTES = _LIB.blockattn_tensor_alignment_bytes()
DEFAULT_BLOCK_SIZE = _LIB.blockattn_default_block_size()


def _read_configs() -> tuple[Config, ...]:
    rows = []
    for i in range(_LIB.blockattn_config_count()):
        row = Config()
        if _LIB.blockattn_config_at(i, ctypes.byref(row)) != OK:
            raise ImportError(f"blockattn: reading kernel table row {i} failed: {last_error()}")
        row.rotary = _LIB.blockattn_config_rotary(i) == 1
        rows.append(row)
    return tuple(rows)


def last_error() -> str:
    """The calling thread's message for its last failed call."""
    message = _LIB.blockattn_last_error()
    return message.decode("utf-8", errors="replace") if message else "(no message)"


CONFIGS = _read_configs()


def _read_dense_configs() -> tuple[DenseConfig, ...]:
    rows = []
    for i in range(_LIB.blockattn_dense_config_count()):
        row = DenseConfig()
        if _LIB.blockattn_dense_config_at(i, ctypes.byref(row)) != OK:
            raise ImportError(f"blockattn: reading dense kernel table row {i} failed: {last_error()}")
        rows.append(row)
    return tuple(rows)


DENSE_CONFIGS = _read_dense_configs()
