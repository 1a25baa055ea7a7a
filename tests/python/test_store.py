"""The shim's Python binding and CoordinatorStore against a real
coordinator: set / get / wait / add within a generation, add summing two
ranks' counters, timeouts, the stale-generation error once the job moves
on, and a torch.distributed Gloo process group formed over the store (two
workers, one thread each)."""

import datetime
import threading
import unittest

from harness import Coordinator, require_torch


class StoreTest(unittest.TestCase):
    def setUp(self):
        require_torch(self)
        import ringmaster
        from ringmaster.torch import CoordinatorStore
        self.ringmaster = ringmaster
        self.Store = CoordinatorStore
        self.coordinator = Coordinator()

    def tearDown(self):
        self.coordinator.stop()

    def shim(self, worker, job="kv", workers=1):
        s = self.ringmaster.Shim(self.coordinator.address, job, worker,
                                 workers)
        self.addCleanup(s.close)
        return s

    def test_set_get_wait_add_in_one_generation(self):
        s = self.shim("a")
        s.start()
        self.assertEqual((s.rank, s.world_size, s.generation), (0, 1, 1))
        st = self.Store(s, s.generation, 0, 1,
                        timeout=datetime.timedelta(milliseconds=300))
        st.set("k", b"v1")
        self.assertEqual(st.get("k"), b"v1")
        st.wait(["k"])
        self.assertTrue(st.check(["k"]))
        self.assertFalse(st.check(["k", "absent"]))
        self.assertEqual(st.add("n", 2), 2)
        self.assertEqual(st.add("n", 3), 5)
        self.assertEqual(st.add("n", 0), 5)
        with self.assertRaisesRegex(Exception, "DEADLINE_EXCEEDED|absent"):
            st.get("absent")  # waits 300 ms, then fails
        with self.assertRaises(NotImplementedError):
            st.delete_key("k")
        # The shim's own rendezvous keys are not visible under the prefix.
        self.assertIsNone(s.kv_get(s.generation, "torch/absent"))
        self.assertEqual(s.kv_get(s.generation, "torch/k"), b"v1")

    def test_a_superseded_generation_is_refused(self):
        a = self.shim("a")
        a.start()
        st = self.Store(a, 1, 0, 1)
        st.set("k", b"1")
        b = self.shim("b")  # a standby until the job grows
        t = threading.Thread(target=b.start)
        t.start()
        self.assertGreaterEqual(self.coordinator.resize("kv", 2), 2)
        self.assertEqual(a.step_boundary(), self.ringmaster.Status.REFORMED)
        t.join(timeout=30)
        self.assertEqual((a.world_size, b.world_size, b.rank), (2, 2, 1))
        with self.assertRaisesRegex(self.ringmaster.ShimError, "stale"):
            st.set("k2", b"2")
        info = a.last_reform()
        self.assertEqual(info.reason, self.ringmaster.Reason.GROW)
        self.assertEqual(info.sync_root, 0)
        self.assertFalse(info.rolled_back)

    def test_add_sums_every_ranks_counter(self):
        shims = [self.shim("a0", "add", 2), self.shim("a1", "add", 2)]
        seen = [None, None]

        def worker(i):
            s = shims[i]
            s.start()
            st = self.Store(s, s.generation, s.rank, s.world_size)
            st.add("n", 1 + 10 * s.rank)  # rank 0 adds 1, rank 1 adds 11
            s.barrier()                   # both counters are set
            seen[i] = st.add("n", 0)

        threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self.assertEqual(seen, [12, 12])

    def test_process_group_over_the_store(self):
        import torch
        import torch.distributed as dist
        # Two workers in this process would share torch's one default group:
        # form each worker's group with the ProcessGroupGloo class directly.
        shims = [self.shim("p0", "pg", 2), self.shim("p1", "pg", 2)]
        results = [None, None]

        def worker(i):
            s = shims[i]
            s.start()
            st = self.Store(s, s.generation, s.rank, s.world_size)
            pg = dist.ProcessGroupGloo(dist.PrefixStore("g", st), s.rank,
                                       s.world_size,
                                       datetime.timedelta(seconds=20))
            t = torch.tensor([float(s.rank + 1)])
            pg.allreduce([t]).wait()
            results[i] = t.item()

        threads = [threading.Thread(target=worker, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        self.assertEqual(results, [3.0, 3.0])


if __name__ == "__main__":
    unittest.main()
