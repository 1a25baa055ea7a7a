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
     current generation's process group (the gradient hook: see _context);
  2. call the function;
  3. HostsUpdatedInterrupt (a planned shrink or grow seen at a step
     boundary; the shim has already re-formed its communicator): roll back
     only if a failure generation came meanwhile, re-form the process
     group, go to 1;
  4. a failure (a shim collective failed or was revoked, the gradient
     all-reduce failed or was abandoned for a failure generation, or a
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
import time
from typing import Callable, Optional, TypeVar

from . import _context as _ctx
from .errors import CollectiveError, HostsUpdatedInterrupt, WorkerRemoved

T = TypeVar("T")


def _log(msg: str) -> None:
    _ctx._log(_ctx.context(), msg)


def _prepare(state) -> None:
    """Step 1, retried through failures until it completes. Records the
    time of each phase (ms from the generation's publication) with the
    re-formation in ctx.reforms."""
    ctx = _ctx.context()
    while True:
        try:
            t_start = time.time()
            if ctx.pg_generation != ctx.generation:
                if ctx.form_process_group():
                    state.restore()
            t_pg = time.time()
            root = 0
            info = ctx.shim.last_reform()
            if info.sync_root >= 0:
                root = info.sync_root
            state.drop_ddp()  # its autograd hooks go with it
            state.sync(root)
            t_sync = time.time()
            state.on_reform()
            t_ddp = time.time()
            ctx.record_reform(phases={"python_start": t_start,
                                      "process_group": t_pg,
                                      "state_sync": t_sync,
                                      "ddp_wrap": t_ddp})
            return
        except CollectiveError as e:
            _log(f"re-formation failed ({e}); recovering")
            ctx.recover()
            state.restore()


def run(func: Callable[..., T]) -> Callable[..., Optional[T]]:
    """Decorator: runs ``func(state, ...)`` elastically, in this process,
    across membership changes. `state` is an ElasticState; ``init()`` must
    have been called. At the start and after every change it syncs the
    state from the lowest rank that holds it, points the sampler at this
    rank and wraps the model in DDP (``state.ddp_model``), then calls
    `func` again: after a planned change (HostsUpdatedInterrupt at a step
    boundary) with the state as it is, after a lost peer (a failed
    collective) with the state rolled back to the last commit. Returns what
    `func` returns, or None when this worker was removed from the job (it
    has then left). Any other exception propagates. The module's
    docstring lists the steps."""
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
                state.drop_ddp()
                if failure is not None:
                    first = (failure.splitlines() or [""])[0]
                    _log(f"collective failed ({first}); recovering")
                    ctx.recover()
                    rolled_back = True
                if rolled_back:
                    state.restore()
                _prepare(state)
        except WorkerRemoved:
            _log("removed from the job")
            state.drop_ddp()
            _ctx.shutdown(finished=False)
            return None

    return wrapper


__all__ = ["run", "HostsUpdatedInterrupt", "CollectiveError", "WorkerRemoved"]
