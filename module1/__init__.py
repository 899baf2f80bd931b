"""Stage 1: tensors (in progress: strided storage and broadcasting so far).

``import module1 as mt`` gives the framework as of this stage: everything of stage 0
plus the names below.
"""

from module0 import *  # noqa: F403
from module0 import __all__ as _stage0
from module1.tensor_data import (
    IndexingError,
    ShapeError,
    TensorData,
    broadcast_index,
    index_to_position,
    shape_broadcast,
    strides_from_shape,
    to_index,
)

__all__ = [
    *_stage0,
    "IndexingError",
    "ShapeError",
    "TensorData",
    "broadcast_index",
    "index_to_position",
    "shape_broadcast",
    "strides_from_shape",
    "to_index",
]
