"""ringmaster's Python package: the worker shim's C API (``ringmaster.Shim``,
ctypes over libringmaster_shim.so) and, in ``ringmaster.torch``, elastic
PyTorch training on it (docs/PYTORCH.md). Importing ``ringmaster`` does not
import torch."""

from ._shim import (DType, Reason, ReduceOp, ReformInfo, Shim, ShimError,
                    Status, library_path)

__version__ = "0.1.0"
__all__ = ["Shim", "ShimError", "Status", "DType", "ReduceOp", "Reason",
           "ReformInfo", "library_path"]
