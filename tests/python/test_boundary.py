"""The step boundary's agreement carried by the gradient all-reduce
(Context.ddp_comm_hook and Context.step_boundary), against a fake shim
that plays the other ranks: every hooked all-reduce carries one extra
element, 1 on a member that has heard of a newer generation; a boundary
after a hooked all-reduce whose sums were all 0 returns without a
collective; any other boundary (a flag set here or at a peer, no hooked
all-reduce since the last boundary, force) runs the shim's. Each case runs
with the gradient all-reduce through the shim and through the process
group (a fake one that plays the peers the same way); the process group's
failure handling (an error, a failure generation while the all-reduce is
blocked, a planned one) has cases of its own. The real multi-process runs
(test_elastic_torch) check that shrink, grow and kill -9 still happen at
the same step on every rank with it."""

import ctypes
import datetime
import os
import unittest
from unittest import mock

from harness import require_torch


class PeerShim:
    """Stands in for ringmaster.Shim in a world of `world`: an all-reduce
    adds `world - 1` peers holding the same values as this rank, except
    that the last element of a hooked all-reduce (the flag) is
    `peer_flags` (the peers' sum) instead of this rank's."""

    def __init__(self, world=2, dtype=ctypes.c_float):
        self.rank, self.world_size, self.generation = 0, world, 1
        self.latest = 1
        self.latest_failure = 0
        self.ticker = None
        self.peer_flags = 0
        self.ctype = dtype
        self.reduced = []  # element count of every all-reduce
        self.boundaries = 0
        self.recovers = 0
        self.fail_next = False

    def latest_generation(self):
        return self.latest

    def latest_failure_generation(self):
        # The hook looks at it once per timed-out wait: the process group's
        # fake work counts those.
        if self.ticker is not None:
            self.ticker()
        return self.latest_failure

    def allreduce(self, address, count, dtype, op):
        from ringmaster._shim import ShimError
        if self.fail_next:
            self.fail_next = False
            raise ShimError("gloo: communicator revoked after a peer failed")
        self.reduced.append(count)
        values = (self.ctype * count).from_address(address)
        for i in range(count - 1):
            values[i] *= self.world_size
        values[count - 1] += self.peer_flags

    def step_boundary(self):
        from ringmaster._shim import Status
        self.boundaries += 1
        if self.latest > self.generation:
            self.generation = self.latest
            return Status.REFORMED
        return Status.OK

    def recover(self):
        from ringmaster._shim import Status
        self.recovers += 1
        self.generation += 1
        return Status.OK

    def last_reform(self):
        return mock.Mock(rolled_back=False)


class FakeWork:
    """A process group's all-reduce: done at once, or after `polls` looks
    at the failure generation (the hook's timed-out waits; `on_poll` runs
    at each), or never (`polls` None); `error` makes it fail when it
    ends."""

    def __init__(self, polls=0, error=None, on_poll=None,
                 ends_as_slice_runs_out=False):
        self.polls, self.error, self.on_poll = polls, error, on_poll
        # The race: the work ends just after its timed wait gave up.
        self.ends_as_slice_runs_out = ends_as_slice_runs_out
        self.completed = False
        self.waits = 0
        self.timed_out = 0
        self.timeouts = []

    def start(self):
        if self.polls == 0:
            self.finish()

    def tick(self):
        if self.completed:
            return
        if self.on_poll is not None:
            self.on_poll()
        if self.polls is not None:
            self.polls -= 1
            if self.polls <= 0:
                self.finish()

    def finish(self):
        self.completed = True

    def wait(self, timeout=None):
        """Work.wait: with a timeout, a work not done by then raises (as
        c10's "Operation timed out!"); each such wait is one look at the
        failure generation by the hook, which ticks the work."""
        self.waits += 1
        self.timeouts.append(timeout)
        if not self.completed:
            if timeout is None:
                raise AssertionError("waited forever on a work not done")
            self.timed_out += 1
            if self.ends_as_slice_runs_out:
                self.finish()
            raise RuntimeError("Operation timed out!")
        if self.error:
            raise RuntimeError(self.error)
        return True

    def is_completed(self):
        return self.completed


class FakeGroup:
    """The generation's process group, playing the peers as PeerShim does
    (the last element is the flag); `next_work` shapes the next call."""

    def __init__(self, shim):
        self.shim = shim
        self.next_work = None
        self.works = []

    def allreduce(self, tensors):
        (t,) = tensors
        work = self.next_work or FakeWork()
        self.next_work = None
        if self.shim.fail_next:
            self.shim.fail_next = False
            work.error = "[pair.cc:598] Connection closed by peer"
        elif not work.error:
            self.shim.reduced.append(t.numel())
            t[:-1] *= self.shim.world_size
            t[-1] += self.shim.peer_flags
        self.works.append(work)
        self.shim.ticker = work.tick
        work.start()
        return work


class BoundaryOnTheGradientAllReduce(unittest.TestCase):
    """Through the shim's communicator (gradients="shim")."""
    GRADIENTS = "shim"

    def setUp(self):
        require_torch(self)
        import torch
        from ringmaster.torch import _context, errors
        self.torch, self.ctxmod, self.errors = torch, _context, errors
        self.shim = PeerShim()
        self.ctx = _context.Context(self.shim, "gloo",
                                    datetime.timedelta(seconds=1),
                                    gradients=self.GRADIENTS)
        self.assertEqual(self.ctx.gradients, self.GRADIENTS)
        self.group = FakeGroup(self.shim)
        if self.GRADIENTS == "torch":
            self.ctx._pg = self.group
            self.ctx.POLL_S = 0.001
            self.ctx.POLL_MAX_S = 0.004

    def hook(self, values, index=0):
        t = self.torch
        buf = t.tensor(values, dtype=t.float32)
        bucket = mock.Mock()
        bucket.buffer.return_value = buf
        bucket.index.return_value = index
        out = self.ctx.ddp_comm_hook(None, bucket).value()
        self.assertIs(out, buf)  # the bucket's own tensor, summed in place
        return buf.tolist()

    def test_gradients_are_summed_and_the_flag_rides_along(self):
        self.assertEqual(self.hook([1.0, -2.0, 0.5]), [2.0, -4.0, 1.0])
        self.assertEqual(self.shim.reduced, [4])  # 3 gradients + the flag
        # Two buckets, of their own sizes, in one step.
        self.assertEqual(self.hook([3.0], index=1), [6.0])
        self.assertEqual(self.shim.reduced, [4, 2])

    def test_no_change_heard_of_skips_the_collective(self):
        for _ in range(5):
            self.hook([1.0])
            self.ctx.step_boundary()
        self.assertEqual(self.shim.boundaries, 0)
        self.assertEqual(self.ctx.boundaries_skipped, 5)
        self.assertEqual(self.shim.reduced, [2] * 5)  # only the gradients

    def test_a_newer_generation_heard_of_here_runs_the_boundary(self):
        self.hook([1.0])
        self.ctx.step_boundary()
        self.shim.latest = 2
        self.hook([1.0])
        with self.assertRaises(self.errors.HostsUpdatedInterrupt):
            self.ctx.step_boundary()
        self.assertEqual(self.shim.boundaries, 1)
        self.assertEqual(self.shim.generation, 2)
        # Reset with the re-formation: the next step skips again.
        self.hook([1.0])
        self.ctx.step_boundary()
        self.assertEqual(self.shim.boundaries, 1)

    def test_a_newer_generation_heard_of_by_a_peer_runs_the_boundary(self):
        # This rank has heard of nothing; a peer has (its flag is in the
        # sum), so this rank enters the boundary at the same step and the
        # shim's max all-reduce brings it the generation.
        self.shim.peer_flags = 1
        self.hook([1.0])
        self.shim.peer_flags = 0
        self.shim.latest = 2  # what the boundary's all-reduce tells it
        with self.assertRaises(self.errors.HostsUpdatedInterrupt):
            self.ctx.step_boundary()
        self.assertEqual(self.shim.boundaries, 1)

    def test_a_flag_in_any_bucket_of_the_step_counts(self):
        self.hook([1.0], index=0)
        self.shim.peer_flags = 1
        self.hook([1.0], index=1)
        self.shim.peer_flags = 0
        self.hook([1.0], index=2)
        self.ctx.step_boundary()
        self.assertEqual(self.shim.boundaries, 1)

    def test_no_hooked_all_reduce_since_the_last_boundary_runs_it(self):
        # e.g. steps under DDP's no_sync, or training without the hook.
        self.ctx.step_boundary()
        self.hook([1.0])
        self.ctx.step_boundary()  # skipped
        self.ctx.step_boundary()  # nothing hooked since: the collective
        self.assertEqual(self.shim.boundaries, 2)
        self.assertEqual(self.ctx.boundaries_full, 2)
        self.assertEqual(self.ctx.boundaries_skipped, 1)

    def test_force_runs_it(self):
        self.hook([1.0])
        self.ctx.step_boundary(force=True)
        self.assertEqual(self.shim.boundaries, 1)

    def test_a_failed_hook_leaves_nothing_flagged_after_recovery(self):
        self.shim.peer_flags = 1
        self.hook([1.0])
        self.shim.peer_flags = 0
        self.shim.fail_next = True
        with self.assertRaises(self.errors.CollectiveError):
            self.hook([1.0])
        self.assertTrue(self.ctx.collective_failed)
        self.ctx.recover()
        self.hook([1.0])
        self.ctx.step_boundary()
        self.assertEqual(self.shim.boundaries, 0)

    def test_float64_gradients_and_unsupported_types(self):
        t = self.torch
        self.shim.ctype = ctypes.c_double
        buf = t.tensor([0.25, 1e300], dtype=t.float64)
        bucket = mock.Mock()
        bucket.buffer.return_value = buf
        bucket.index.return_value = 0
        self.ctx.ddp_comm_hook(None, bucket)
        self.assertEqual(buf.tolist(), [0.5, 2e300])
        for dtype in (t.int64, t.float16):
            bucket.buffer.return_value = t.zeros(2, dtype=dtype)
            with self.assertRaisesRegex(TypeError, "gradient hook"):
                self.ctx.ddp_comm_hook(None, bucket)

    def test_the_host_buffer_is_reused_and_resized_with_the_bucket(self):
        self.hook([1.0, 2.0])
        first = self.ctx._staging[0]
        self.hook([1.0, 2.0])
        self.assertIs(self.ctx._staging[0], first)
        self.assertEqual(self.hook([1.0, 2.0, 3.0]), [2.0, 4.0, 6.0])
        self.assertEqual(self.ctx._staging[0].numel(), 4)
        self.ctx.drop_staging()
        self.assertEqual(self.ctx._staging, {})



class BoundaryOnTheProcessGroupAllReduce(BoundaryOnTheGradientAllReduce):
    """The same cases through the generation's process group
    (gradients="torch", the default with Gloo), and its failure
    handling."""
    GRADIENTS = "torch"

    def test_the_all_reduce_goes_to_the_process_group_not_the_shim(self):
        self.hook([1.0, 2.0])
        self.assertEqual(len(self.group.works), 1)
        self.assertTrue(self.group.works[0].completed)

    def test_a_failure_generation_abandons_a_blocked_all_reduce(self):
        def failure_published():
            self.shim.latest = self.shim.latest_failure = 2
        blocked = FakeWork(polls=None, on_poll=failure_published)
        self.group.next_work = blocked
        with self.assertRaisesRegex(self.errors.CollectiveError,
                                    "abandoned: generation 2"):
            self.hook([1.0])
        self.assertTrue(self.ctx.collective_failed)
        self.assertEqual(self.ctx.abandoned_total, 1)
        # The group stays alive while its all-reduce may still run ...
        self.ctx._destroy_process_group()
        self.assertEqual([w for _, w in self.ctx._abandoned], [blocked])
        self.assertIsNone(self.ctx._pg)
        # ... and is let go once it has ended.
        blocked.completed = True
        self.ctx._destroy_process_group()
        self.assertEqual(self.ctx._abandoned, [])

    def test_a_planned_generation_does_not_abandon_the_all_reduce(self):
        # A grow published while the step's all-reduce runs: every member
        # finishes the step; the change waits for the boundary.
        def grow_published():
            self.shim.latest = 2
        slow = FakeWork(polls=3, on_poll=grow_published)
        self.group.next_work = slow
        self.assertEqual(self.hook([1.5]), [3.0])
        self.assertTrue(slow.completed)
        self.assertEqual(self.ctx.abandoned_total, 0)
        self.assertFalse(self.ctx.collective_failed)
        with self.assertRaises(self.errors.HostsUpdatedInterrupt):
            self.hook([1.0])  # heard of now: flagged, the boundary runs
            self.ctx.step_boundary()

    def test_a_failure_generation_older_than_this_worker_is_ignored(self):
        # A failure before this worker's generation (it is what formed it)
        # does not end a slow all-reduce of the current one.
        self.shim.latest_failure = 1
        self.group.next_work = FakeWork(polls=2)
        self.assertEqual(self.hook([2.0]), [4.0])
        self.assertEqual(self.ctx.abandoned_total, 0)

    def test_the_wait_ends_when_the_work_does(self):
        slow = FakeWork(polls=5)
        self.group.next_work = slow
        self.assertEqual(self.hook([1.0, 2.0]), [2.0, 4.0])
        # Five slices ran out (one look at the failure generation each),
        # the sixth wait saw it done.
        self.assertEqual(slow.timed_out, 5)
        self.assertEqual(slow.waits, 6)
        # The slices double up to POLL_MAX_S.
        ms = [round(t.total_seconds() * 1000) for t in slow.timeouts]
        self.assertEqual(ms, [1, 2, 4, 4, 4, 4])
        self.assertFalse(self.ctx.collective_failed)

    def test_a_work_that_ends_as_its_slice_runs_out_is_no_error(self):
        # The timed wait raised, but the all-reduce has ended meanwhile
        # (without error): its result stands, nothing failed.
        late = FakeWork(polls=None, ends_as_slice_runs_out=True)
        self.group.next_work = late
        self.assertEqual(self.hook([1.0, 3.0]), [2.0, 6.0])
        self.assertEqual(late.timed_out, 1)
        self.assertFalse(self.ctx.collective_failed)
        self.assertEqual(self.ctx.abandoned_total, 0)

    def test_an_error_of_the_all_reduce_fails_the_step(self):
        self.group.next_work = FakeWork(polls=1, error="Connection reset")
        with self.assertRaisesRegex(self.errors.CollectiveError,
                                    "Connection reset"):
            self.hook([1.0])
        self.assertTrue(self.ctx.collective_failed)
        self.assertEqual(self.ctx.abandoned_total, 0)  # nothing blocked

    def test_no_process_group_is_a_collective_error(self):
        self.ctx._pg = None
        with self.assertRaisesRegex(self.errors.CollectiveError,
                                    "no process group"):
            self.hook([1.0])


class ChooseGradients(unittest.TestCase):
    def setUp(self):
        require_torch(self)
        from ringmaster.torch import _context
        self.choose = _context.choose_gradients

    def test_auto_follows_the_backend_and_the_environment(self):
        with mock.patch.dict(os.environ, {}, clear=False):
            os.environ.pop("RINGMASTER_GRADIENTS", None)
            self.assertEqual(self.choose(None, "gloo"), "torch")
            self.assertEqual(self.choose("auto", "nccl"), "shim")
            os.environ["RINGMASTER_GRADIENTS"] = "shim"
            self.assertEqual(self.choose(None, "gloo"), "shim")
            self.assertEqual(self.choose("torch", "gloo"), "torch")

    def test_bad_values_are_refused(self):
        with self.assertRaisesRegex(ValueError, "'torch', 'shim' or 'auto'"):
            self.choose("nccl", "gloo")
        with self.assertRaisesRegex(ValueError, "needs the Gloo backend"):
            self.choose("torch", "nccl")


if __name__ == "__main__":
    unittest.main()
