"""A torch.distributed.Store over the coordinator's key-value store.

The process group of each generation rendezvouses through the generation's
own key-value scope on the coordinator (the one the shim's Gloo mesh uses),
so there is no TCPStore to host and nothing survives into the next
generation: the coordinator keeps the current generation's keys only, and a
call into a superseded generation fails with "stale generation" at once,
which ends a process-group rendezvous that a newer membership made
pointless.

Keys live under a prefix ("torch/" by default), apart from the shim's own.

What the coordinator offers is set, get and wait, so:
  - ``add(key, n)`` keeps one counter per rank (``key/+rank``) and returns
    the sum of all ranks' counters (after waiting up to 50 ms for all of
    them to exist): a grow-only counter. That is exactly what torch's own
    users of ``add`` (the store-based barrier after ``init_process_group``)
    need, but unlike TCPStore's ``add`` it is not a fetch-and-add: two ranks
    adding at once may read the same total.
  - ``compare_set``, ``delete_key`` and ``num_keys`` raise
    NotImplementedError (the coordinator's store is write-once per
    generation, and PyTorch's process groups do not call them).
"""

from __future__ import annotations

import datetime
import struct
from typing import List, Optional

import torch.distributed as dist

from .._shim import Shim, ShimError


class CoordinatorStore(dist.Store):
    """Scoped to (job, generation); `rank` and `world_size` are this
    worker's in that generation (for ``add``)."""

    ADD_WAIT_MS = 50

    def __init__(self, shim: Shim, generation: int, rank: int,
                 world_size: int,
                 timeout: datetime.timedelta = datetime.timedelta(seconds=30),
                 prefix: str = "torch/"):
        super().__init__()
        self._shim = shim
        self._generation = generation
        self._rank = rank
        self._world_size = world_size
        self._prefix = prefix
        self._own_counts = {}
        self.set_timeout(timeout)

    @property
    def generation(self) -> int:
        return self._generation

    def _key(self, key: str) -> str:
        return self._prefix + key

    def _timeout_ms(self, timeout: Optional[datetime.timedelta] = None) -> int:
        t = self.timeout if timeout is None else timeout
        return max(0, int(t.total_seconds() * 1000))

    def set(self, key: str, value) -> None:
        if isinstance(value, str):
            value = value.encode()
        self._shim.kv_set(self._generation, self._key(key), bytes(value))

    def get(self, key: str) -> bytes:
        return self._shim.kv_get(self._generation, self._key(key),
                                 self._timeout_ms())

    def check(self, keys: List[str]) -> bool:
        return all(self._shim.kv_get(self._generation, self._key(k)) is not None
                   for k in keys)

    def wait(self, keys: List[str],
             timeout: Optional[datetime.timedelta] = None) -> None:
        self._shim.kv_wait(self._generation, [self._key(k) for k in keys],
                           self._timeout_ms(timeout))

    def add(self, key: str, amount: int) -> int:
        mine = self._own_counts.get(key, 0) + int(amount)
        if amount != 0 or key not in self._own_counts:
            self._shim.kv_set(self._generation, self._key(f"{key}/+{self._rank}"),
                              struct.pack("<q", mine))
            self._own_counts[key] = mine
        others = [self._key(f"{key}/+{r}") for r in range(self._world_size)
                  if r != self._rank]
        # Up to ADD_WAIT_MS for every rank's counter to exist (one round
        # trip that returns when the last one comes): torch's barrier after
        # init_process_group polls add(key, 0) until all ranks have added,
        # and this ends it as soon as they have, instead of at its next
        # 10 ms poll with a round trip per rank each time.
        try:
            self._shim.kv_wait(self._generation, others, self.ADD_WAIT_MS)
        except ShimError as e:
            if "DEADLINE_EXCEEDED" not in str(e):
                raise
        total = mine
        for k in others:
            v = self._shim.kv_get(self._generation, k)
            if v is not None:
                total += struct.unpack("<q", v)[0]
        return total

    def compare_set(self, key, expected_value, desired_value):
        raise NotImplementedError("the coordinator's store has no compare_set")

    def delete_key(self, key: str) -> bool:
        raise NotImplementedError("the coordinator's store keeps keys for the "
                                  "generation's lifetime")

    def num_keys(self) -> int:
        raise NotImplementedError("the coordinator's store does not count keys")


__all__ = ["CoordinatorStore", "ShimError"]
