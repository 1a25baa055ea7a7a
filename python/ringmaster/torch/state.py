"""ElasticState: what a worker must carry across membership changes.

Holds the model (the plain ``torch.nn.Module``), its optimizer, an
ElasticSampler and any extra picklable values given as keyword arguments
(``ElasticState(model=m, optimizer=o, sampler=s, step=0)`` makes
``state.step``).

  - ``commit()``: copies everything in memory (the rollback point), reports
    the step and sample position to the coordinator, then runs the step
    boundary (``check_host_updates()``).
  - ``check_host_updates()``: the step boundary; call it once per step
    (every member must, the same number of times). It raises
    HostsUpdatedInterrupt when the membership changed; ``@elastic.run``
    then re-forms and calls the training function again. After a step
    whose gradient all-reduce (the DDP hook) said that no member had heard
    of a change, it returns without a collective (Context.step_boundary).
  - ``restore()``: back to the last commit.
  - ``sync()``: everything from the lowest surviving rank to the others
    (torch.save'd once, broadcast through the shim).

``ddp_model`` is the model wrapped in DistributedDataParallel for the
current generation (rebuilt at every re-formation, gradients all-reduced
by Context.ddp_comm_hook); train through it, save and inspect ``model``.
"""

from __future__ import annotations

import copy
import gc
import io
import time
import weakref
from typing import Any, Dict, Optional

import torch

from . import _context as _ctx
from .sampler import ElasticSampler


def _onto(device: torch.device):
    """torch.load's map_location for a state blob from another rank: CUDA
    tensors onto this worker's GPU (the sender's may be another index),
    CPU tensors (an optimizer's step counts) left on the CPU."""
    if device.type != "cuda":
        return None

    def place(storage, location):
        if location.startswith("cuda"):
            return storage.cuda(device.index)
        return storage
    return place


class ElasticState:
    """What a worker carries across membership changes: the model (a plain
    ``torch.nn.Module``), its optimizer, an ElasticSampler, and any extra
    picklable values given as keywords (``ElasticState(..., step=0)`` makes
    ``state.step``, saved and restored with the rest).

    Train through ``state.ddp_model`` (the model wrapped in DDP for the
    current generation, rebuilt at every change; ``ddp_kwargs`` go to
    DistributedDataParallel); keep ``state.model`` for saving and
    evaluation. Call ``commit()`` every few steps and
    ``check_host_updates()`` at every other step, at the same steps on every
    rank. Pass it to a function decorated with ``@elastic.run``.
    See docs/PYTORCH.md, section 3."""

    def __init__(self, model: Optional[torch.nn.Module] = None,
                 optimizer: Optional[torch.optim.Optimizer] = None,
                 sampler: Optional[ElasticSampler] = None,
                 ddp_kwargs: Optional[Dict[str, Any]] = None, **extra: Any):
        self.model = model
        self.optimizer = optimizer
        self.sampler = sampler
        self.ddp_model: Optional[torch.nn.Module] = None
        self._ddp_kwargs = dict(ddp_kwargs or {})
        self._extra_keys = list(extra)
        for k, v in extra.items():
            setattr(self, k, v)
        self._saved: Optional[Dict[str, Any]] = None
        self.commits = 0
        # (generation, step, sampler position, time) of the last commit.
        self._last_commit: Optional[tuple] = None

    # -- what is carried --------------------------------------------------------
    def _snapshot(self) -> Dict[str, Any]:
        s: Dict[str, Any] = {"extra": {k: getattr(self, k)
                                       for k in self._extra_keys}}
        if self.model is not None:
            s["model"] = self.model.state_dict()
        if self.optimizer is not None:
            s["optimizer"] = self.optimizer.state_dict()
        if self.sampler is not None:
            s["sampler"] = self.sampler.state_dict()
        return s

    def _load(self, s: Dict[str, Any]) -> None:
        if self.model is not None:
            self.model.load_state_dict(s["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(s["optimizer"])
        if self.sampler is not None:
            self.sampler.load_state_dict(s["sampler"])
        for k, v in s["extra"].items():
            setattr(self, k, v)

    # -- commit / restore / sync ------------------------------------------------
    def save(self) -> None:
        """The in-memory rollback point (no boundary, no report)."""
        self._saved = copy.deepcopy(self._snapshot())
        self.commits += 1

    def commit(self, step: Optional[int] = None) -> None:
        """Makes the current state the rollback point (an in-memory deep
        copy of the model, optimizer, sampler and extra values), reports
        `step` (default ``state.step``, else 0) and the sampler's position
        to the coordinator, then runs the step boundary
        (``check_host_updates()``), so it may raise HostsUpdatedInterrupt.
        After a failure the members roll back to their last commit, so
        commit every few steps (it costs a copy of the state)."""
        self.save()
        ctx = _ctx.context()
        position = 0
        if self.sampler is not None:
            position = (self.sampler.epoch * self.sampler.num_samples +
                        self.sampler.position)
        if step is None:
            step = int(getattr(self, "step", 0))
        self._report_speed(ctx, step, position)
        ctx.shim.commit(step, position)
        self.check_host_updates()

    def _report_speed(self, ctx, step: int, position: int) -> None:
        """The speed since the previous commit of this generation (seconds
        and sampler positions per step), for the scheduler's speed model
        (docs/PYTORCH.md, "Speed reports"); nothing on the first commit of
        a generation, or when no step passed."""
        now = time.monotonic()
        generation = ctx.generation
        last = self._last_commit
        self._last_commit = (generation, step, position, now)
        if last is None or last[0] != generation or step <= last[1]:
            return
        steps = step - last[1]
        samples = max(0, position - last[2]) / steps
        ctx.shim.report_step((now - last[3]) / steps, samples)

    def check_host_updates(self) -> None:
        """The step boundary, where all members agree to switch to a new
        generation: returns when the membership is unchanged; raises
        HostsUpdatedInterrupt when it changed (``@elastic.run`` catches it,
        re-forms and calls the training function again), WorkerRemoved when
        this worker was shrunk away, CollectiveError when a peer failed.
        Call it (or ``commit()``) once per step at the same steps on every
        rank; after a step whose gradient all-reduce carried no change it
        costs microseconds, no collective."""
        _ctx.context().step_boundary()

    def restore(self) -> None:
        """Back to the last commit (nothing happens before the first)."""
        if self._saved is not None:
            self._load(copy.deepcopy(self._saved))

    def sync(self, root: int = 0) -> None:
        """Sends the state of rank `root` to every other member (one
        torch.save blob, broadcast through the shim); ``@elastic.run`` calls
        it after every re-formation."""
        ctx = _ctx.context()
        payload = None
        if ctx.rank == root:
            buf = io.BytesIO()
            torch.save(self._snapshot(), buf)
            payload = buf.getvalue()
        data = ctx.broadcast_bytes(payload, root)
        if ctx.rank != root:
            self._load(torch.load(io.BytesIO(data),
                                  map_location=_onto(ctx.device)))
        # A newcomer's rollback point is what it just received.
        if self._saved is None:
            self.save()

    # -- per generation -----------------------------------------------------------
    def drop_ddp(self) -> None:
        """Drops the DDP wrapper of the previous generation. Its reducer's
        autograd hooks must be gone before the next backward (else they
        would all-reduce a second time): normally the last reference goes
        here; if something (a traceback, a cycle) still holds it, a full
        garbage collection runs (tens of ms with torch loaded)."""
        if self.ddp_model is None:
            return
        ref = weakref.ref(self.ddp_model)
        self.ddp_model = None
        if ref() is not None:
            gc.collect()

    def on_reform(self) -> None:
        """Called by @elastic.run after every (re-)formation and sync: points
        the sampler at the new rank and world size and wraps the model in
        DDP over the new process group, with the gradient hook
        (Context.ddp_comm_hook)."""
        ctx = _ctx.context()
        if self.sampler is not None:
            self.sampler.set_world(ctx.rank, ctx.world_size)
        if self.model is not None:
            self.drop_ddp()
            ctx.drop_staging()
            kwargs = dict(self._ddp_kwargs)
            if ctx.device.type == "cuda" and "device_ids" not in kwargs:
                kwargs["device_ids"] = [ctx.device.index]  # one GPU a worker
            ddp = torch.nn.parallel.DistributedDataParallel(self.model,
                                                            **kwargs)
            ddp.register_comm_hook(None, ctx.ddp_comm_hook)
            self.ddp_model = ddp
