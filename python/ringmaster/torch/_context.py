"""One worker's membership in an elastic job, as PyTorch sees it.

``init()`` joins the job through the shim (``libringmaster_shim.so``), waits
to be a member, and creates the ``torch.distributed`` default process group
of the current generation over ``CoordinatorStore`` (the coordinator's
key-value store of that generation). After every membership change the
process group is destroyed and the new generation's created, in the same
process (``reform_process_group``).

Two communicators live side by side, on purpose:
  1. the shim's (Gloo over TCP, host memory, built by the shim): the step
     boundary, the state sync and ``allreduce_``. The shim revokes it as
     soon as the coordinator publishes a failure generation, so a survivor
     blocked on a dead peer (kill -9) fails within tens of milliseconds,
     not at a timeout;
  2. PyTorch's own process group of the generation: the gradient all-reduce
     (the DDP communication hook below, which also carries the step
     boundary's membership flag) when it is Gloo's (``gradients="torch"``,
     the default on the CPU: the very collective plain DDP runs, so the
     hook costs what DDP's own does), and everything else the user's code
     or DDP does through ``torch.distributed``. PyTorch 1.13's Gloo process
     group has no abort and is a different Gloo build from the shim's, so
     revocation cannot reach it; instead the hook waits for its all-reduce
     in slices (``Work.wait(timeout)``, 20 ms growing to 50) and, once the
     coordinator has published a failure generation newer than this
     worker's, stops waiting: the
     process group is abandoned (kept alive, never destroyed while its
     all-reduce may still be blocked) and the step fails as a shim
     collective would. A call of the user's own that waits on a dead peer
     ends when its socket reports the death (usually at once) or at
     ``pg_timeout`` (default 30 s, instead of torch's 30 minutes).
     With ``gradients="shim"`` (the default where the process group is
     NCCL's: the bucket is staged through host memory) the gradient
     all-reduce goes through the shim's revocable communicator instead.
     docs/PYTORCH.md says why; docs/BENCHMARKS.md measures both.

Where CUDA exists the process group is NCCL's and the model lives on this
worker's GPU (``Context.device``); the shim stays on Gloo (its step
boundary and state sync are host-memory collectives), so the gradient hook
and ``allreduce_`` stage a CUDA tensor through host memory around the
shim's all-reduce. That path is unit-tested with CUDA mocked; it has not
run on a GPU (docs/PYTORCH.md, limits).
"""

from __future__ import annotations

import ctypes
import datetime
import os
import sys
import time
from typing import Optional

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as _c10d

from .._shim import DType, ReduceOp, Shim, ShimError, Status
from .errors import CollectiveError, HostsUpdatedInterrupt, WorkerRemoved
from .store import CoordinatorStore

_DTYPES = {torch.float32: DType.FLOAT32, torch.float64: DType.FLOAT64,
           torch.int64: DType.INT64}


def _log(ctx, msg: str) -> None:
    print(f"ringmaster.torch [rank {ctx.rank}/{ctx.world_size} gen "
          f"{ctx.generation}]: {msg}", file=sys.stderr, flush=True)


class Context:
    """The process's elastic membership (one per process, see ``init``)."""

    # How long (s) the gradient all-reduce on the process group waits
    # before its first look at the coordinator's failure generation, and
    # at most between two looks (see _allreduce_on_process_group).
    POLL_S = 0.02
    POLL_MAX_S = 0.05

    def __init__(self, shim: Shim, backend: str,
                 pg_timeout: datetime.timedelta,
                 device: Optional[torch.device] = None,
                 gradients: str = "auto"):
        self.shim = shim
        # torch.distributed's backend ("gloo" or "nccl"); the shim's is Gloo.
        self.backend = backend
        # What carries the gradient all-reduce: "torch" (the generation's
        # process group) or "shim" (the shim's communicator); see
        # choose_gradients.
        self.gradients = choose_gradients(gradients, backend)
        # The generation's process group (set by reform_process_group), and
        # groups abandoned with an all-reduce still waiting in them: kept
        # alive until that all-reduce ends (destroying a Gloo process group
        # joins its worker threads, which would wait out the blocked call).
        self._pg = None
        self._abandoned = []
        self.abandoned_total = 0
        # Where this worker's model lives: its GPU with NCCL, else the CPU.
        self.device = device if device is not None else torch.device("cpu")
        self.pg_timeout = pg_timeout
        self.pg_generation = 0
        # Set by a shim collective that failed (the DDP hook's failure
        # surfaces from autograd as a plain RuntimeError).
        self.collective_failed = False
        self.finished = False
        # The re-formations this worker completed (ReformInfo), in order.
        self.reforms = []
        # The step boundary's agreement, carried by the gradient all-reduce
        # (see ddp_comm_hook and step_boundary): whether a hooked all-reduce
        # completed since the last boundary, and whether one of them said
        # that some member has heard of a newer generation. Identical on
        # every member: they come from the same all-reduces' results.
        self._hooked = False
        self._change_flagged = False
        # Counters (tests, benchmarks): boundaries decided from the flag
        # without a collective, and those that ran the shim's boundary.
        self.boundaries_skipped = 0
        self.boundaries_full = 0
        # Host staging buffers of the gradient hook, by bucket index: the
        # bucket's gradients plus the flag element.
        self._staging = {}

    def record_reform(self, phases=None) -> None:
        """Appends the last re-formation (ReformInfo) to ``reforms``, with
        ``phases``: unix times (s) at which ringmaster.torch's own steps
        ended (process group, state sync, DDP wrap), as ``info.phases``."""
        info = self.shim.last_reform()
        info.phases = dict(phases or {})
        if not self.reforms or self.reforms[-1].generation != info.generation:
            self.reforms.append(info)
        else:
            self.reforms[-1] = info

    # -- membership ---------------------------------------------------------
    @property
    def rank(self) -> int:
        return self.shim.rank

    @property
    def world_size(self) -> int:
        return self.shim.world_size

    @property
    def generation(self) -> int:
        return self.shim.generation

    def reform_process_group(self) -> None:
        """Destroys the process group (if any) and creates the current
        generation's. Raises CollectiveError when the rendezvous fails (a
        peer died, or a newer generation superseded this one)."""
        self._destroy_process_group()
        gen, rank, world = self.generation, self.rank, self.world_size
        store = CoordinatorStore(self.shim, gen, rank, world,
                                 timeout=self.pg_timeout)
        # torch 1.13 names the default group, and keys the barrier after
        # init_process_group, by a module counter that destroy_process_group
        # resets but a failed init_process_group leaves advanced: start every
        # generation's from 0, so that all members use the same keys (the
        # store is the generation's own, nothing else is in it).
        if hasattr(_c10d, "_group_count"):
            _c10d._group_count = 0
        try:
            dist.init_process_group(self.backend, store=store, rank=rank,
                                    world_size=world, timeout=self.pg_timeout)
        except (RuntimeError, ShimError) as e:
            self._destroy_process_group()
            raise CollectiveError(
                f"process group of generation {gen}: {e}") from e
        # (Not initialized only where a test mocks init_process_group.)
        self._pg = _c10d._get_default_group() if dist.is_initialized() else None
        self.pg_generation = gen

    def _destroy_process_group(self) -> None:
        """Destroys the default process group, if any (an abandoned one is
        only let go: see _abandon), and frees abandoned groups whose
        all-reduce has ended meanwhile."""
        self._pg = None
        if dist.is_initialized():
            dist.destroy_process_group()
        self._abandoned = [(pg, work) for pg, work in self._abandoned
                           if not work.is_completed()]

    def _abandon(self, work) -> None:
        """Keeps the current process group alive while `work` (its
        all-reduce, blocked on a peer that failed) may still run; the group
        is freed once the work ends (a peer's socket closes, or
        pg_timeout), at a later re-formation, or never (see shutdown)."""
        if self._pg is not None:
            self._abandoned.append((self._pg, work))
            self.abandoned_total += 1

    def form_process_group(self) -> bool:
        """Creates the current generation's process group, with the same
        outcome on every member: after trying, the members agree (a max
        all-reduce through the shim) whether anyone failed. If so, and a
        newer generation exists (the usual cause: it was published during
        the rendezvous, and the old generation's store refuses every call),
        everyone moves to it through a step boundary and tries again. Returns
        whether a failure generation came meanwhile (the state must roll
        back). Raises CollectiveError (a peer died: recover) or
        WorkerRemoved."""
        rolled_back = False
        while True:
            error = None
            try:
                self.reform_process_group()
            except CollectiveError as e:
                error = e
            failed = torch.tensor([0 if error is None else 1],
                                  dtype=torch.int64)
            self.allreduce_(failed, op="max")
            if int(failed.item()) == 0:
                return rolled_back
            _log(self, f"process group of generation {self.generation} not "
                 f"formed ({error or 'by a peer'}); moving on")
            self._destroy_process_group()
            self.pg_generation = 0
            if self.shim.latest_generation() <= self.generation:
                raise CollectiveError(
                    f"process group of generation {self.generation}: "
                    f"{error or 'a peer failed to form it'}")
            try:
                self.step_boundary(force=True)
            except HostsUpdatedInterrupt as e:
                rolled_back = rolled_back or e.rolled_back

    def step_boundary(self, force: bool = False) -> None:
        """The step boundary: returns when the membership is unchanged;
        raises HostsUpdatedInterrupt after the shim re-formed (the caller
        then re-forms the process group), WorkerRemoved, or CollectiveError.

        The agreement rides on the gradient all-reduce: every hooked
        all-reduce (ddp_comm_hook) carries one extra element, 1 on a member
        that has heard of a newer generation than its own, and its sum is
        the same on every member. So when a hooked all-reduce completed
        since the last boundary and none of their sums was non-zero, no
        member had heard of a change at that all-reduce, every member
        knows it, and the boundary returns at once, with no collective.
        Otherwise (a flag was set, no hooked all-reduce happened since the
        last boundary, e.g. under DDP's no_sync, or `force`) it runs the
        shim's own boundary: an 8-byte max all-reduce of the newest
        generation, then the re-formation. Both conditions are the same on
        every member (DDP runs the same all-reduces on all of them), so all
        members take the same branch at the same step. A change heard of
        after a step's gradient all-reduce takes effect at the next step's
        boundary."""
        if not force and self._hooked and not self._change_flagged:
            self._hooked = False
            self.boundaries_skipped += 1
            return
        self._reset_flag()
        self.boundaries_full += 1
        try:
            status = self.shim.step_boundary()
        except ShimError as e:
            raise CollectiveError(str(e)) from e
        if status == Status.REMOVED:
            raise WorkerRemoved()
        if status == Status.REFORMED:
            raise HostsUpdatedInterrupt(self.shim.last_reform().rolled_back)

    def _reset_flag(self) -> None:
        self._hooked = False
        self._change_flagged = False

    def recover(self) -> None:
        """After a failed collective: the next generation, rolled back.
        Raises WorkerRemoved when this worker is no longer a member."""
        self.collective_failed = False
        self._reset_flag()
        status = self.shim.recover()
        if status == Status.REMOVED:
            raise WorkerRemoved()

    def is_failure(self, error: BaseException, wait_s: float = 2.0) -> bool:
        """Whether `error`, raised in the training function, is a lost peer
        rather than a bug: a shim collective failed, or (a torch.distributed
        error) the coordinator publishes a newer generation within
        `wait_s`."""
        if isinstance(error, CollectiveError) or self.collective_failed:
            return True
        if not isinstance(error, RuntimeError):
            return False
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self.shim.latest_generation() > self.generation:
                return True
            time.sleep(0.01)
        return False

    # -- collectives through the shim ----------------------------------------
    def allreduce_(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """In-place all-reduce of a contiguous tensor through the shim
        (float32, float64 or int64; op "sum" or "max"). A CPU tensor is
        reduced where it is; any other (a CUDA tensor) is copied to host
        memory, reduced there and copied back (the shim's collectives are
        Gloo's, over host memory). Raises CollectiveError."""
        if not tensor.is_contiguous():
            raise ValueError("allreduce_ needs a contiguous tensor")
        dtype = _DTYPES.get(tensor.dtype)
        if dtype is None:
            raise TypeError(f"allreduce_ does not take {tensor.dtype}")
        if op not in ("sum", "max"):
            raise ValueError(f"allreduce_: op must be 'sum' or 'max', not {op!r}")
        staged = tensor.device.type != "cpu"
        # .to("cpu") waits for the tensor's stream: the copy is complete.
        host = tensor.detach().to("cpu") if staged else tensor
        try:
            self.shim.allreduce(host.data_ptr(), host.numel(), dtype,
                                ReduceOp.SUM if op == "sum" else ReduceOp.MAX)
        except ShimError as e:
            self.collective_failed = True
            raise CollectiveError(str(e)) from e
        if staged:
            tensor.copy_(host)
        return tensor

    def broadcast_bytes(self, payload: Optional[bytes], root: int) -> bytes:
        """Root's `payload` on every rank (length first, then the bytes)."""
        try:
            n = torch.tensor([len(payload) if self.rank == root else 0],
                             dtype=torch.int64)
            self.shim.broadcast(n.data_ptr(), 8, root)
            buf = torch.empty(int(n.item()), dtype=torch.uint8)
            if self.rank == root:
                buf.copy_(torch.frombuffer(bytearray(payload), dtype=torch.uint8))
            if buf.numel() > 0:
                self.shim.broadcast(buf.data_ptr(), buf.numel(), root)
        except ShimError as e:
            self.collective_failed = True
            raise CollectiveError(str(e)) from e
        return buf.numpy().tobytes()

    def ddp_comm_hook(self, _state, bucket):
        """DDP communication hook: the bucket's gradients summed over the
        ranks through the shim (not averaged: see ElasticSampler on the
        loss scale), with the step boundary's membership flag as one extra
        element of the same all-reduce (see step_boundary). The bucket is
        copied into a host buffer one element longer (for a CUDA bucket
        that is the copy to host memory it needs anyway), all-reduced
        there and copied back."""
        buf = bucket.buffer()
        n = buf.numel()
        dtype = _DTYPES.get(buf.dtype)
        if dtype is None or dtype == DType.INT64:
            raise TypeError(f"the gradient hook does not take {buf.dtype} "
                            "gradients (float32 or float64)")
        stage = self._stage(bucket.index(), n + 1, buf.dtype)
        grads = stage.narrow(0, 0, n)
        grads.copy_(buf)
        newer = self.shim.latest_generation() > self.generation
        stage[n] = 1.0 if newer else 0.0
        if self.gradients == "torch":
            self._allreduce_on_process_group(stage)
        else:
            try:
                self.shim.allreduce(stage.data_ptr(), n + 1, dtype,
                                    ReduceOp.SUM)
            except ShimError as e:
                self.collective_failed = True
                raise CollectiveError(str(e)) from e
        self._hooked = True
        if float(stage[n]) != 0.0:
            self._change_flagged = True
        buf.copy_(grads)
        fut = torch.futures.Future()
        fut.set_result(buf)
        return fut

    def _allreduce_on_process_group(self, tensor: torch.Tensor) -> None:
        """Sums `tensor` over the generation's process group (the
        collective plain DDP runs), waiting in slices (POLL_S, doubling up
        to POLL_MAX_S): an error of the all-reduce (a peer's socket closed)
        or a failure generation newer than this worker's (a peer this
        rank's all-reduce may wait on forever is gone) raises
        CollectiveError; in the second case the process group is
        abandoned, not destroyed."""
        if self._pg is None:
            self.collective_failed = True
            raise CollectiveError("no process group for the gradient "
                                  "all-reduce")
        try:
            work = self._pg.allreduce([tensor])
        except RuntimeError as e:
            self.collective_failed = True
            raise CollectiveError(f"gradient all-reduce: {e}") from e
        # Work.wait(timeout) in C++, the GIL released: an all-reduce that
        # ends within the first slice (every step's, normally) costs what
        # plain DDP's wait does. A slice that runs out raises a c10::Error
        # (about 1 ms of CPU for its backtrace), hence slices that grow.
        # Not a callback on the work's future: running Python on Gloo's
        # thread costs about 0.4 ms a call (measured: docs/BENCHMARKS.md).
        slice_s = self.POLL_S
        while True:
            try:
                work.wait(datetime.timedelta(seconds=slice_s))
                return
            except RuntimeError:
                pass  # the slice ran out, or the all-reduce failed
            if work.is_completed():
                # Ended (maybe just after the slice ran out): returns, or
                # raises the all-reduce's own error.
                try:
                    work.wait()
                    return
                except RuntimeError as e:
                    self.collective_failed = True
                    raise CollectiveError(f"gradient all-reduce: {e}") from e
            failed = self.shim.latest_failure_generation()
            if failed > self.generation:
                self._abandon(work)
                self.collective_failed = True
                raise CollectiveError(
                    f"gradient all-reduce abandoned: generation {failed} "
                    f"was published after a peer failed")
            slice_s = min(2 * slice_s, self.POLL_MAX_S)

    def _stage(self, index: int, numel: int, dtype) -> torch.Tensor:
        """The hook's host buffer for bucket `index` (reused while its size
        and type stay; DDP rebuilds its buckets once, after the first
        step)."""
        stage = self._staging.get(index)
        if stage is None or stage.numel() != numel or stage.dtype != dtype:
            stage = None
            if self.device.type == "cuda":
                try:  # page-locked: faster copies to and from the GPU
                    stage = torch.empty(numel, dtype=dtype, pin_memory=True)
                except RuntimeError:
                    stage = None
            if stage is None:
                stage = torch.empty(numel, dtype=dtype)
            self._staging[index] = stage
        return stage

    def drop_staging(self) -> None:
        """Frees the hook's host buffers (a new DDP wrapper, new buckets)."""
        self._staging = {}

    # -- end ------------------------------------------------------------------
    def shutdown(self, finished: bool = True) -> None:
        """Leaves the job (finished: the whole job is done; every member
        passes a barrier first) and destroys the process group."""
        if self.finished:
            return
        self.finished = True
        self._destroy_process_group()
        # A group whose all-reduce is still blocked would make the
        # interpreter's exit wait for it (its destructor joins the worker
        # thread, up to pg_timeout): such groups are deliberately never
        # destroyed; the process's exit frees them.
        for pg, _work in self._abandoned:
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(pg))
        self._abandoned = []
        if finished:
            try:
                self.shim.barrier()
            except ShimError:
                pass
        try:
            self.shim.leave(finished)
        except ShimError:
            pass
        self.shim.close()


_context: Optional[Context] = None


def choose_backend(backend: Optional[str] = None) -> str:
    """torch.distributed's backend: `backend` when given ("gloo" or
    "nccl"), else NCCL where CUDA (and torch's NCCL) exists, else Gloo."""
    if backend is None:
        cuda = torch.cuda.is_available() and dist.is_nccl_available()
        return "nccl" if cuda else "gloo"
    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be 'gloo' or 'nccl', not {backend!r}")
    if backend == "nccl" and not torch.cuda.is_available():
        raise ValueError("backend 'nccl' needs CUDA, and torch.cuda."
                         "is_available() is False in this process")
    return backend


def choose_gradients(gradients: Optional[str], backend: str) -> str:
    """What carries the DDP gradient all-reduce: "torch" (the generation's
    torch.distributed process group, the collective plain DDP runs) or
    "shim" (the shim's revocable Gloo communicator, the bucket staged
    through host memory). "auto" (or None): RINGMASTER_GRADIENTS if set,
    else "torch" with the Gloo backend and "shim" with NCCL (whose process
    group cannot be abandoned as safely: a blocked NCCL kernel holds the
    GPU)."""
    if gradients in (None, "auto"):
        gradients = os.environ.get("RINGMASTER_GRADIENTS") or "auto"
    if gradients == "auto":
        return "torch" if backend == "gloo" else "shim"
    if gradients not in ("torch", "shim"):
        raise ValueError(f"gradients must be 'torch', 'shim' or 'auto', "
                         f"not {gradients!r}")
    if gradients == "torch" and backend != "gloo":
        raise ValueError("gradients='torch' needs the Gloo backend (with "
                         "NCCL the gradients go through the shim)")
    return gradients


def choose_device(backend: str) -> torch.device:
    """This worker's device: the CPU for Gloo; for NCCL the GPU named by
    RINGMASTER_CUDA_DEVICE, else LOCAL_RANK (torchrun's convention), else
    the current one (CUDA_VISIBLE_DEVICES decides), made current."""
    if backend != "nccl":
        return torch.device("cpu")
    name = (os.environ.get("RINGMASTER_CUDA_DEVICE") or
            os.environ.get("LOCAL_RANK"))
    index = int(name) if name else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if not 0 <= index < count:
        raise ValueError(f"CUDA device {index} does not exist ({count} "
                         f"visible; set RINGMASTER_CUDA_DEVICE)")
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def init(desired_workers: Optional[int] = None, backend: Optional[str] = None,
         pg_timeout: datetime.timedelta = datetime.timedelta(seconds=30),
         coordinator: Optional[str] = None, job: Optional[str] = None,
         worker: Optional[str] = None,
         gradients: Optional[str] = None,
         membership_timeout=None) -> Context:
    """Joins the job and creates the process group of the first generation
    this worker is a member of.

    It waits up to the membership timeout to be admitted (the whole gang
    must join first), and every later membership change waits as long for
    its generation: 60 s by default; ``membership_timeout`` (seconds, or a
    ``datetime.timedelta``) or the environment variable
    RINGMASTER_MEMBERSHIP_TIMEOUT (seconds, or "90s", "2m") change it. When
    it runs out, ShimError: ``UNAVAILABLE`` naming the coordinator's address
    and why it cannot be reached (connection refused, no answer; or lost
    since when), or ``DEADLINE_EXCEEDED`` saying what the coordinator has
    of the job (e.g. 1 of 2 workers joined). A coordinator that cannot be
    reached is logged at once on stderr, and retried every 0.1 s meanwhile.

    coordinator / job / worker default to RINGMASTER_COORDINATOR /
    RINGMASTER_JOB / RINGMASTER_WORKER (what ``ringmaster shim run --mode
    inprocess`` sets), desired_workers (the gang size, used by whoever
    creates the job) to RINGMASTER_WORKERS. backend: torch.distributed's, "gloo" (CPU)
    or "nccl"; default NCCL where CUDA exists (see choose_backend and
    choose_device; the model then belongs on ``ctx.device``). The shim's
    own communicator is Gloo's either way. gradients: what carries the DDP
    gradient all-reduce, "torch", "shim" or "auto" (see choose_gradients;
    RINGMASTER_GRADIENTS sets it from outside). A second call returns the
    same context."""
    global _context
    if _context is not None and not _context.finished:
        return _context
    if desired_workers is None:
        desired_workers = int(os.environ.get("RINGMASTER_WORKERS", "0") or 0)
    backend = choose_backend(backend)
    gradients = choose_gradients(gradients, backend)
    device = choose_device(backend)
    shim = Shim(coordinator, job, worker, desired_workers, "gloo")
    if membership_timeout is not None:
        if isinstance(membership_timeout, datetime.timedelta):
            membership_timeout = membership_timeout.total_seconds()
        shim.membership_timeout = float(membership_timeout)
    delay = os.environ.get("RINGMASTER_REFORM_DELAY_MS")
    if delay:
        shim.set_reform_delay(int(delay))
    shim.start()
    ctx = Context(shim, backend, pg_timeout, device, gradients)
    while True:
        try:
            ctx.form_process_group()
            break
        except CollectiveError as e:
            _log(ctx, f"first process group failed ({e}); recovering")
            ctx.recover()
    _context = ctx
    return ctx


def context() -> Context:
    """The process's Context (what ``init()`` returned); RuntimeError before
    ``init()`` or after ``shutdown()``."""
    if _context is None or _context.finished:
        raise RuntimeError("ringmaster.torch.init() has not been called")
    return _context


def shutdown(finished: bool = True) -> None:
    """Ends this worker's part in the job: with ``finished=True`` (the
    whole job is done; every member must call it) a barrier with the other
    members, then leave, which ends the job on the coordinator; with
    ``finished=False`` this worker leaves alone (the others go on without
    it). Destroys the process group and closes the shim; ``init()`` may be
    called again afterwards. Does nothing before ``init()``."""
    global _context
    if _context is not None:
        _context.shutdown(finished)
        _context = None


def allreduce_(tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
    """Reduces `tensor` in place over the current generation's members and
    returns it: ``op`` "sum" or "max"; float32, float64 or int64; a CUDA
    tensor is staged through host memory. It goes through the shim's
    communicator (not torch.distributed), which the shim revokes when a
    peer fails: then it raises CollectiveError, which ``@elastic.run``
    treats as a lost peer (rollback to the last commit, re-formation, the
    training function called again)."""
    return context().allreduce_(tensor, op)


def rank() -> int:
    """This worker's rank in the current generation."""
    return context().rank


def world_size() -> int:
    """The current generation's number of workers."""
    return context().world_size


def generation() -> int:
    """The current generation's number (it grows with every change)."""
    return context().generation
