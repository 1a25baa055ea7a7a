"""ringmaster for PyTorch: elastic DDP training in the same process across
shrink, grow and kill -9 (docs/PYTORCH.md).

    import ringmaster.torch as rmt
    rmt.init()
    state = rmt.ElasticState(model=m, optimizer=o, sampler=rmt.ElasticSampler(n, batch))

    @rmt.elastic.run
    def train(state): ...
"""

from . import elastic
from ._context import (Context, allreduce_, context, generation, init, rank,
                      shutdown, world_size)
from .errors import CollectiveError, HostsUpdatedInterrupt, WorkerRemoved
from .sampler import ElasticSampler
from .state import ElasticState
from .store import CoordinatorStore

__all__ = ["init", "shutdown", "context", "Context", "rank", "world_size",
           "generation", "allreduce_", "ElasticState", "ElasticSampler",
           "CoordinatorStore", "elastic", "HostsUpdatedInterrupt",
           "CollectiveError", "WorkerRemoved"]
