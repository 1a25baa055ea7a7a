"""ctypes binding of the worker shim's C API (worker_shim/ringmaster_shim.h).

Why ctypes and not pybind11 (docs/PYTORCH.md says the same): the C API is
already the shim's stable, tested boundary; ctypes needs no compiler and no
Python headers, so the package stays pure Python (``pip install ./python``
works offline, one ``libringmaster_shim.so`` serves every Python 3), nothing
is compiled against Python (the sanitizer build never loads libasan into an
interpreter), and ctypes releases the GIL around every foreign call, so a
collective blocked in the shim never stalls the interpreter's other threads.
The price is about a microsecond per call, nothing beside an all-reduce.

The library is found, in order: ``$RINGMASTER_SHIM_LIBRARY`` (a file that
does not exist there is an error naming the variable, not a fall-back); a
copy beside this file (the build tree's staged package, ``build/*/python``);
the system loader's search (``ctypes.util.find_library``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import os
import threading
from typing import Optional, Sequence

__all__ = ["Shim", "ShimError", "Status", "DType", "ReduceOp", "ReformInfo",
           "library_path"]


class Status(enum.IntEnum):
    OK = 0
    ERROR = 1
    REFORMED = 2
    REMOVED = 3


class DType(enum.IntEnum):
    FLOAT32 = 0
    FLOAT64 = 1
    INT64 = 2


class ReduceOp(enum.IntEnum):
    SUM = 0
    MAX = 1


class Reason(enum.IntEnum):
    UNSPECIFIED = 0
    INITIAL = 1
    PLANNED_SHRINK = 2
    GROW = 3
    FAILURE = 4
    RECOVERY = 5


class ShimError(RuntimeError):
    """A shim call failed; the message is the shim's (an absl::Status)."""


class _ReformInfo(ctypes.Structure):
    _fields_ = [
        ("generation", ctypes.c_int64),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("rolled_back", ctypes.c_int),
        ("sync_root", ctypes.c_int),
        ("reason", ctypes.c_int),
        ("prepared", ctypes.c_int),
        ("published_unix_us", ctypes.c_int64),
        ("boundary_unix_us", ctypes.c_int64),
        ("formed_unix_us", ctypes.c_int64),
        ("synced_unix_us", ctypes.c_int64),
    ]


class ReformInfo:
    """The last completed re-formation (rm_reform_info)."""

    def __init__(self, raw: _ReformInfo):
        self.generation = raw.generation
        self.rank = raw.rank
        self.world_size = raw.world_size
        self.rolled_back = bool(raw.rolled_back)
        self.sync_root = raw.sync_root
        try:
            self.reason = Reason(raw.reason)
        except ValueError:
            self.reason = Reason.UNSPECIFIED
        self.prepared = bool(raw.prepared)
        self.published_unix_us = raw.published_unix_us
        self.boundary_unix_us = raw.boundary_unix_us
        self.formed_unix_us = raw.formed_unix_us
        self.synced_unix_us = raw.synced_unix_us

    def __repr__(self) -> str:
        return (f"ReformInfo(generation={self.generation}, rank={self.rank}, "
                f"world_size={self.world_size}, reason={self.reason.name}, "
                f"rolled_back={self.rolled_back}, sync_root={self.sync_root})")


_lib = None
_lib_lock = threading.Lock()


def library_path() -> str:
    """Where libringmaster_shim.so is loaded from (see the module comment).
    Raises ShimError when RINGMASTER_SHIM_LIBRARY names a file that does not
    exist (the message names the variable and the path), or when the
    library is found nowhere."""
    env = os.environ.get("RINGMASTER_SHIM_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise ShimError(
                f"RINGMASTER_SHIM_LIBRARY={env!r}: no such file (it should "
                f"name libringmaster_shim.so, built as "
                f"build/<dir>/worker_shim/libringmaster_shim.so; unset it to "
                f"use the copy beside the ringmaster package)")
        return env
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "libringmaster_shim.so")
    if os.path.exists(here):
        return here
    found = ctypes.util.find_library("ringmaster_shim")
    if found:
        return found
    raise ShimError(
        "libringmaster_shim.so not found: set RINGMASTER_SHIM_LIBRARY to it "
        "(it is built as build/<dir>/worker_shim/libringmaster_shim.so), or "
        "use the staged package under build/<dir>/python")


def _load():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = library_path()
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            source = ("set by RINGMASTER_SHIM_LIBRARY"
                      if os.environ.get("RINGMASTER_SHIM_LIBRARY") else
                      "beside the package or from the system loader")
            raise ShimError(f"cannot load the shim library {path!r} "
                            f"({source}): {e}") from e
        vp, cp, i64, sz = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64,
                           ctypes.c_size_t)
        st = ctypes.c_int

        def sig(name, restype, *argtypes):
            f = getattr(lib, name)
            f.restype = restype
            f.argtypes = list(argtypes)

        sig("rm_shim_create", vp, cp, cp, cp, ctypes.c_int, cp)
        sig("rm_shim_destroy", None, vp)
        sig("rm_shim_last_error", cp, vp)
        sig("rm_shim_register", st, vp, cp, vp, sz)
        sig("rm_shim_start", st, vp)
        sig("rm_shim_allreduce", st, vp, vp, sz, ctypes.c_int, ctypes.c_int)
        sig("rm_shim_broadcast", st, vp, vp, sz, ctypes.c_int)
        sig("rm_shim_barrier", st, vp)
        sig("rm_shim_commit", st, vp, i64, i64)
        sig("rm_shim_report_step", st, vp, ctypes.c_double, ctypes.c_double)
        sig("rm_shim_step_boundary", st, vp)
        sig("rm_shim_recover", st, vp)
        sig("rm_shim_leave", st, vp, ctypes.c_int)
        sig("rm_shim_kv_set", st, vp, i64, cp, vp, sz)
        sig("rm_shim_kv_get", st, vp, i64, cp, i64,
            ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(sz))
        sig("rm_shim_kv_wait", st, vp, i64, ctypes.POINTER(cp), sz, i64)
        sig("rm_shim_last_reform", st, vp, ctypes.POINTER(_ReformInfo))
        sig("rm_shim_set_reform_delay", st, vp, ctypes.c_int)
        sig("rm_shim_set_membership_timeout", st, vp, i64)
        sig("rm_shim_membership_timeout_ms", i64, vp)
        sig("rm_shim_latest_generation", i64, vp)
        sig("rm_shim_latest_failure_generation", i64, vp)
        sig("rm_shim_rank", ctypes.c_int, vp)
        sig("rm_shim_world_size", ctypes.c_int, vp)
        sig("rm_shim_generation", i64, vp)
        _lib = lib
        return lib


def _enc(s: Optional[str]) -> Optional[bytes]:
    return None if s is None else s.encode()


class Shim:
    """One worker of one elastic job (an ``rm_shim*`` handle).

    Collectives and membership calls (``allreduce``, ``broadcast``,
    ``step_boundary``, ``recover``, ...) belong to one training thread; the
    key-value calls may come from any thread (a lock serializes them with
    the rest, as the C API requires one caller at a time).

    Failing calls raise ShimError; ``step_boundary`` and ``recover`` return
    a Status (OK, REFORMED, REMOVED).
    """

    def __init__(self, coordinator: Optional[str] = None,
                 job: Optional[str] = None, worker: Optional[str] = None,
                 desired_workers: int = 0, backend: str = "gloo"):
        self._lib = _load()
        self._lock = threading.RLock()
        self._h = self._lib.rm_shim_create(_enc(coordinator), _enc(job),
                                           _enc(worker), int(desired_workers),
                                           _enc(backend))
        if not self._h:
            raise MemoryError("rm_shim_create")
        err = self._lib.rm_shim_last_error(self._h).decode()
        if err:
            self._lib.rm_shim_destroy(self._h)
            self._h = None
            raise ShimError(err)

    # -- lifetime ---------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            if self._h:
                self._lib.rm_shim_destroy(self._h)
                self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _check(self, status: int) -> Status:
        if status == Status.ERROR:
            raise ShimError(self._lib.rm_shim_last_error(self._h).decode())
        return Status(status)

    def _handle(self):
        if not self._h:
            raise ShimError("shim is closed")
        return self._h

    # -- membership -------------------------------------------------------
    def start(self) -> None:
        """Waits to be a member (up to ``membership_timeout``), forms the
        communicator and syncs the registered state. ShimError when the
        coordinator cannot be reached (``UNAVAILABLE``, naming its address)
        or this worker was not admitted in time (``DEADLINE_EXCEEDED``,
        saying what the job has)."""
        with self._lock:
            self._check(self._lib.rm_shim_start(self._handle()))

    def step_boundary(self) -> Status:
        with self._lock:
            return self._check(self._lib.rm_shim_step_boundary(self._handle()))

    def recover(self) -> Status:
        with self._lock:
            return self._check(self._lib.rm_shim_recover(self._handle()))

    def commit(self, step: int, position: int) -> None:
        with self._lock:
            self._check(self._lib.rm_shim_commit(self._handle(), int(step),
                                                 int(position)))

    def report_step(self, seconds: float, samples: float = 0) -> None:
        """The training loop's measured speed in this generation: seconds
        per optimizer step and global samples per step (0: unknown). The
        next ``commit`` of this generation sends it to the coordinator
        (rank 0), which keeps the mean by the generation's size for the
        scheduler's speed model; a re-formation drops an unsent one."""
        with self._lock:
            self._check(self._lib.rm_shim_report_step(
                self._handle(), float(seconds), float(samples)))

    def leave(self, finished: bool) -> None:
        with self._lock:
            self._check(self._lib.rm_shim_leave(self._handle(),
                                                1 if finished else 0))

    def set_reform_delay(self, ms: int) -> None:
        self._lib.rm_shim_set_reform_delay(self._handle(), int(ms))

    @property
    def membership_timeout(self) -> float:
        """Seconds the shim waits for a generation this worker is a member
        of (``start``, ``recover``, a step boundary's re-formation): 60
        unless RINGMASTER_MEMBERSHIP_TIMEOUT said otherwise when the shim
        was created. Settable (seconds, > 0) for the waits that follow."""
        return self._lib.rm_shim_membership_timeout_ms(self._handle()) / 1000

    @membership_timeout.setter
    def membership_timeout(self, seconds: float) -> None:
        with self._lock:
            self._check(self._lib.rm_shim_set_membership_timeout(
                self._handle(), int(round(float(seconds) * 1000))))

    def last_reform(self) -> ReformInfo:
        with self._lock:
            raw = _ReformInfo()
            self._check(self._lib.rm_shim_last_reform(self._handle(),
                                                      ctypes.byref(raw)))
            return ReformInfo(raw)

    @property
    def rank(self) -> int:
        return self._lib.rm_shim_rank(self._handle())

    @property
    def world_size(self) -> int:
        return self._lib.rm_shim_world_size(self._handle())

    @property
    def generation(self) -> int:
        return self._lib.rm_shim_generation(self._handle())

    def latest_generation(self) -> int:
        return self._lib.rm_shim_latest_generation(self._handle())

    def latest_failure_generation(self) -> int:
        """The newest generation published because a member failed (0:
        none yet)."""
        return self._lib.rm_shim_latest_failure_generation(self._handle())

    # -- collectives over raw memory ----------------------------------------
    def allreduce(self, address: int, count: int, dtype: DType,
                  op: ReduceOp = ReduceOp.SUM) -> None:
        """In place over `count` elements at `address` (e.g. a contiguous
        CPU tensor's data_ptr())."""
        with self._lock:
            self._check(self._lib.rm_shim_allreduce(
                self._handle(), ctypes.c_void_p(address), count, int(dtype),
                int(op)))

    def broadcast(self, address: int, nbytes: int, root: int) -> None:
        with self._lock:
            self._check(self._lib.rm_shim_broadcast(
                self._handle(), ctypes.c_void_p(address), nbytes, root))

    def barrier(self) -> None:
        with self._lock:
            self._check(self._lib.rm_shim_barrier(self._handle()))

    # -- key-value store of one generation ----------------------------------
    def kv_set(self, generation: int, key: str, value: bytes) -> None:
        with self._lock:
            self._check(self._lib.rm_shim_kv_set(self._handle(), generation,
                                                 key.encode(), value,
                                                 len(value)))

    def kv_get(self, generation: int, key: str,
               timeout_ms: int = -1) -> Optional[bytes]:
        """timeout_ms < 0: no wait, None when absent; else waits for it."""
        with self._lock:
            ptr = ctypes.c_void_p()
            n = ctypes.c_size_t()
            self._check(self._lib.rm_shim_kv_get(
                self._handle(), generation, key.encode(), int(timeout_ms),
                ctypes.byref(ptr), ctypes.byref(n)))
            if not ptr.value:
                return None if timeout_ms < 0 else b""
            return ctypes.string_at(ptr.value, n.value)

    def kv_wait(self, generation: int, keys: Sequence[str],
                timeout_ms: int) -> None:
        with self._lock:
            arr = (ctypes.c_char_p * len(keys))(*[k.encode() for k in keys])
            self._check(self._lib.rm_shim_kv_wait(self._handle(), generation,
                                                  arr, len(keys),
                                                  int(timeout_ms)))
