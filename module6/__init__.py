"""Stage 6: past float32 and past one process. Half-precision storage
(:mod:`module6.half`), autocast (:mod:`module6.amp`) and dynamic loss scaling
(:mod:`module6.scaler`); a ring all-reduce over MPI (:mod:`module6.distributed`) and
data-parallel training (:mod:`module6.ddp`): one copy of the model per process, their
gradients averaged after every backward.

``import module6 as mt`` gives the whole framework: everything of stages 0 to 5 plus
these names. MPI itself (mpi4py) is imported only when a communicator is asked for.
"""

from module5 import *  # noqa: F403
from module5 import __all__ as _stage5
from module6 import amp, ddp, distributed, half, scaler
from module6.amp import autocast, saved_bytes
from module6.ddp import DistributedDataParallel, DistributedSampler, shard
from module6.distributed import DistributedError, bus_bandwidth, ring_all_reduce, world
from module6.half import bfloat16, float16
from module6.scaler import GradScaler, ScalerError

__all__ = [
    *_stage5,
    "DistributedDataParallel",
    "DistributedError",
    "DistributedSampler",
    "GradScaler",
    "ScalerError",
    "amp",
    "autocast",
    "bfloat16",
    "bus_bandwidth",
    "ddp",
    "distributed",
    "float16",
    "half",
    "ring_all_reduce",
    "saved_bytes",
    "scaler",
    "shard",
    "world",
]
