"""Stage 1: tensors — strided storage, broadcasting, a backend protocol, tensor autodiff.

``import module1 as mt`` gives the framework as of this stage: everything of stage 0
plus the names below (``mt.tensor``, ``mt.Tensor``, ``mt.MLP``, ...).
"""

from module0 import *  # noqa: F403
from module0 import __all__ as _stage0
from module1.grad_check import grad_check
from module1.graph import draw_graph as draw_graph  # stage 0's name, drawing tensors too
from module1.graph import graph_summary, record_modules
from module1.indexing import ModifiedError
from module1.shape_ops import cat, chunk, masked_fill, narrow, split, stack, where
from module1.tensor import (
    Tensor,
    from_numpy,
    manual_seed,
    matmul,
    ones,
    rand,
    tensor,
    zeros,
)
from module1.tensor_data import (
    IndexingError,
    ShapeError,
    TensorData,
    as_dtype,
    broadcast_index,
    float32,
    float64,
    index_to_position,
    index_view,
    shape_broadcast,
    strides_from_shape,
    to_index,
)
from module1.tensor_functions import BackendError, DtypeError, Function, unbroadcast
from module1.tensor_nn import MLP, Linear, binary_cross_entropy_with_logits
from module1.tensor_ops import SimpleBackend, SimpleOps, TensorBackend, TensorOps

__all__ = [
    *_stage0,
    "cat",
    "chunk",
    "masked_fill",
    "narrow",
    "split",
    "stack",
    "where",
    "graph_summary",
    "record_modules",
    "MLP",
    "BackendError",
    "DtypeError",
    "Function",
    "IndexingError",
    "Linear",
    "ModifiedError",
    "ShapeError",
    "SimpleBackend",
    "SimpleOps",
    "Tensor",
    "TensorBackend",
    "TensorData",
    "TensorOps",
    "as_dtype",
    "binary_cross_entropy_with_logits",
    "broadcast_index",
    "float32",
    "float64",
    "from_numpy",
    "grad_check",
    "index_to_position",
    "index_view",
    "manual_seed",
    "matmul",
    "ones",
    "rand",
    "shape_broadcast",
    "strides_from_shape",
    "tensor",
    "to_index",
    "unbroadcast",
    "zeros",
]
