"""``@ringmaster.torch.elastic.run``: the elastic loop around a training
function, in the same process across membership changes (Horovod-Elastic
shaped).

    @ringmaster.torch.elastic.run
    def train(state):
        ...               # use state.ddp_model, state.sampler, ...
        state.commit()    # or state.check_host_updates(), once per step

    state = ringmaster.torch.ElasticState(model=m, optimizer=o, sampler=s)
    result = train(state)  # None when this worker was removed

The wrapper, step by step:
  1. sync the state from the lowest rank that holds state (rank 0 at the
     start), point the sampler at this rank, wrap the model in DDP over the
     current generation's process group (gradients through the shim);
  2. call the function;
  3. HostsUpdatedInterrupt (a planned shrink or grow seen at a step
     boundary; the shim has already re-formed its communicator): roll back
     only if a failure generation came meanwhile, re-form the process
     group, go to 1;
  4. a failure (a shim collective failed or was revoked, or a
     torch.distributed error while the coordinator publishes a newer
     generation): report it, wait for the next generation, restore the last
     commit, re-form, go to 1;
  5. WorkerRemoved: destroy the process group, leave, return None;
  6. the function returned: return its value (call
     ``ringmaster.torch.shutdown()`` once every worker is done).
Any other exception is a bug and propagates (the process exits, its peers
see a failure and carry on without it).
"""

from __future__ import annotations

import functools
import gc
import sys
from typing import Callable, Optional, TypeVar

import torch.distributed as dist

from . import _context as _ctx
from .errors import CollectiveError, HostsUpdatedInterrupt, WorkerRemoved

T = TypeVar("T")


def _log(msg: str) -> None:
    ctx = _ctx._context
    who = f"rank {ctx.rank}/{ctx.world_size} gen {ctx.generation}" if ctx else ""
    print(f"ringmaster.torch [{who}]: {msg}", file=sys.stderr, flush=True)


def _prepare(state) -> None:
    """Step 1, retried through failures until it completes."""
    ctx = _ctx.context()
    while True:
        try:
            if ctx.pg_generation != ctx.generation:
                if ctx.form_process_group():
                    state.restore()
            root = 0
            try:
                info = ctx.shim.last_reform()
                if info.sync_root >= 0:
                    root = info.sync_root
            except Exception:  # never formed: impossible after init()
                pass
            state.ddp_model = None
            gc.collect()  # the old DDP's autograd hooks go with it
            state.sync(root)
            state.on_reform()
            ctx.record_reform()
            return
        except CollectiveError as e:
            _log(f"re-formation failed ({e}); recovering")
            ctx.recover()
            state.restore()


def run(func: Callable[..., T]) -> Callable[..., Optional[T]]:
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs) -> Optional[T]:
        ctx = _ctx.context()
        try:
            _prepare(state)
            while True:
                rolled_back = False
                failure = None
                try:
                    return func(state, *args, **kwargs)
                except HostsUpdatedInterrupt as e:
                    rolled_back = e.rolled_back
                    _log("membership changed at a step boundary"
                         + (" (rolled back)" if rolled_back else ""))
                except Exception as e:  # noqa: BLE001 - sorted just below
                    if isinstance(e, WorkerRemoved):
                        raise
                    if not ctx.is_failure(e):
                        raise
                    failure = str(e)
                # Outside the except block: the traceback (and the frames
                # holding the old DDP wrapper) is gone.
                state.ddp_model = None
                if failure is not None:
                    _log(f"collective failed ({failure.splitlines()[0]}); "
                         "recovering")
                    ctx.recover()
                    rolled_back = True
                if rolled_back:
                    state.restore()
                _prepare(state)
        except WorkerRemoved:
            _log("removed from the job")
            state.ddp_model = None
            if dist.is_initialized():
                dist.destroy_process_group()
            ctx.shutdown(finished=False)
            _ctx._context = None
            return None

    return wrapper


__all__ = ["run", "HostsUpdatedInterrupt", "CollectiveError", "WorkerRemoved"]
