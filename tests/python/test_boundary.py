"""The step boundary's agreement carried by the gradient all-reduce
(Context.ddp_comm_hook and Context.step_boundary), against a fake shim
that plays the other ranks: every hooked all-reduce carries one extra
element, 1 on a member that has heard of a newer generation; a boundary
after a hooked all-reduce whose sums were all 0 returns without a
collective; any other boundary (a flag set here or at a peer, no hooked
all-reduce since the last boundary, force) runs the shim's. The real
multi-process runs (test_elastic_torch) check that shrink, grow and kill -9
still happen at the same step on every rank with it."""

import ctypes
import datetime
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
        self.peer_flags = 0
        self.ctype = dtype
        self.reduced = []  # element count of every all-reduce
        self.boundaries = 0
        self.recovers = 0
        self.fail_next = False

    def latest_generation(self):
        return self.latest

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


class BoundaryOnTheGradientAllReduce(unittest.TestCase):
    def setUp(self):
        require_torch(self)
        import torch
        from ringmaster.torch import _context, errors
        self.torch, self.ctxmod, self.errors = torch, _context, errors
        self.shim = PeerShim()
        self.ctx = _context.Context(self.shim, "gloo",
                                    datetime.timedelta(seconds=1))

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


if __name__ == "__main__":
    unittest.main()
