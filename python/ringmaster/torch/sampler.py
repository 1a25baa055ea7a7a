"""ElasticSampler: every sample exactly once per epoch, whatever the
membership does.

The data set is read in global steps of ``batch_size`` samples (the global
batch, fixed for the whole run): the step that starts at position ``p`` of
epoch ``e`` covers positions ``[p, p + b)`` of that epoch's order, where
``b = min(batch_size, num_samples - p)``. Rank ``r`` of ``W`` takes the
positions ``p + j`` with ``j % W == r``. The order is a permutation drawn
from ``seed + epoch`` (or the identity without shuffling), the same on
every worker.

So what a step covers depends only on (epoch, position), never on the world
size: after a shrink, a grow or a rollback to a commit, the next step
continues at the committed position and the union of the ranks' shares is
exactly the step's samples. The position advances when a step's indices are
handed out; ElasticState saves it with each commit and restores it on a
rollback, and it is synced to newcomers with the rest of the state.

Gradients summed across ranks equal the single-process gradient of the same
step when each rank's loss is its samples' loss sum divided by
``sampler.step_samples`` (the step's global size ``b``); that is what makes
the weights independent of the membership history.
"""

from __future__ import annotations

from typing import Dict, Iterator, List

import torch


class ElasticSampler:
    """Every sample exactly once per epoch, whatever the membership does.

    Iterate ``for indices in sampler`` (a batch sampler): each item is this
    rank's list of sample indices for the next global step of the current
    epoch (``batch_size`` is the global batch, over all ranks); at the end
    of the epoch the iteration stops and ``epoch`` advances. ``step_samples``
    is the global size of the step just handed out: ``batch_size``, except
    the last step of an epoch, which is smaller when ``num_samples`` is not
    a multiple of it; divide the summed loss by it. The order is drawn from
    ``seed + epoch`` (``shuffle=False``: the identity).

    It needs no ``init()``: alone it is one rank of one (useful for a
    single-process reference run); in an ElasticState the elastic loop
    sets its rank and world size at every change and saves its position
    with each commit."""

    def __init__(self, num_samples: int, batch_size: int, shuffle: bool = True,
                 seed: int = 0):
        if num_samples <= 0 or batch_size <= 0:
            raise ValueError("num_samples and batch_size must be positive")
        self.num_samples = int(num_samples)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.seed = int(seed)
        self.epoch = 0
        self.position = 0
        self.rank = 0
        self.world_size = 1
        self.step_samples = 0   # global size of the step last handed out
        self.step_position = 0  # its first position
        self._order_epoch = -1
        self._order: torch.Tensor = torch.empty(0, dtype=torch.int64)

    # -- membership -------------------------------------------------------
    def set_world(self, rank: int, world_size: int) -> None:
        """Called by ringmaster.torch at every (re-)formation."""
        if world_size <= 0 or not 0 <= rank < world_size:
            raise ValueError(f"bad rank {rank} of {world_size}")
        self.rank = rank
        self.world_size = world_size

    # -- order ------------------------------------------------------------
    def _epoch_order(self) -> torch.Tensor:
        if self._order_epoch != self.epoch:
            if self.shuffle:
                g = torch.Generator()
                g.manual_seed(self.seed + self.epoch)
                self._order = torch.randperm(self.num_samples, generator=g)
            else:
                self._order = torch.arange(self.num_samples)
            self._order_epoch = self.epoch
        return self._order

    def local_indices(self, position: int) -> List[int]:
        """This rank's share of the step starting at `position`."""
        b = min(self.batch_size, self.num_samples - position)
        order = self._epoch_order()
        return order[position + self.rank:position + b:self.world_size].tolist()

    def __iter__(self) -> Iterator[List[int]]:
        while self.position < self.num_samples:
            p = self.position
            self.step_position = p
            self.step_samples = min(self.batch_size, self.num_samples - p)
            indices = self.local_indices(p)
            self.position = p + self.step_samples
            yield indices
        self.epoch += 1
        self.position = 0

    def __len__(self) -> int:
        """Steps left in the current epoch."""
        left = self.num_samples - self.position
        return (left + self.batch_size - 1) // self.batch_size

    # -- state --------------------------------------------------------------
    def state_dict(self) -> Dict[str, int]:
        """Epoch and position (what ElasticState commits and syncs)."""
        return {"epoch": self.epoch, "position": self.position,
                "step_samples": self.step_samples,
                "step_position": self.step_position}

    def load_state_dict(self, state: Dict[str, int]) -> None:
        """Back to a ``state_dict()``."""
        self.epoch = int(state["epoch"])
        self.position = int(state["position"])
        self.step_samples = int(state.get("step_samples", 0))
        self.step_position = int(state.get("step_position", 0))
