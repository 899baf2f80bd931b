"""Stage 6: past one process. A ring all-reduce over MPI (:mod:`module6.distributed`)
and data-parallel training (:mod:`module6.ddp`): one copy of the model per process,
their gradients averaged after every backward.

``import module6 as mt`` gives the whole framework: everything of stages 0 to 5 plus
these names. MPI itself (mpi4py) is imported only when a communicator is asked for.
"""

from module5 import *  # noqa: F403
from module5 import __all__ as _stage5
from module6 import ddp, distributed
from module6.ddp import DistributedDataParallel, DistributedSampler, shard
from module6.distributed import DistributedError, bus_bandwidth, ring_all_reduce, world

__all__ = [
    *_stage5,
    "DistributedDataParallel",
    "DistributedError",
    "DistributedSampler",
    "bus_bandwidth",
    "ddp",
    "distributed",
    "ring_all_reduce",
    "shard",
    "world",
]
