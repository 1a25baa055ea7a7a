"""Real PyTorch DDP jobs on the shim (examples/pytorch/train_mlp.py, four
workers under `ringmaster shim run --mode inprocess`), through (a) a
planned shrink to 2 by `ringmaster resize` and a grow back to 4 with new
processes (one at a time), (b) a kill -9 of a worker frozen while its
peers wait in the gradient all-reduce, (c) a kill -9 of rank 0, (d) a
kill -9 while the members are re-forming (each re-formation waits 1 s
before its rendezvous). Every run must end with 0 duplicate and 0 skipped
samples (per step and over the committed history), no step where ranks
disagreed on the position, and the weights of the single-process reference
run within 1e-5 relative.
"""

import os
import signal
import time
import unittest

from harness import (Coordinator, Job, SleepWatch, reference,
                     relative_error, require_torch, wait_until)

# 2 epochs of 1536 samples, global batch 32: 96 steps.
SAMPLES, EPOCHS, BATCH = 1536, 2, 32
TOTAL = SAMPLES * EPOCHS
TRAIN = ["--samples", str(SAMPLES), "--epochs", str(EPOCHS), "--batch",
         str(BATCH), "--dim", "16", "--hidden", "32", "--commit-every", "4",
         "--check", "--pg-timeout-s", "20"]
_reference = None


def ref():
    global _reference
    if _reference is None:
        _reference = reference(TRAIN)
    return _reference


class ElasticTorch(unittest.TestCase):
    def setUp(self):
        require_torch(self)
        self.coordinator = Coordinator()
        self.job = None

    def tearDown(self):
        if self.job is not None:
            self.job.cleanup()
        self.coordinator.stop()

    def start(self, step_delay_ms=40, env=None):
        self.job = Job(self, self.coordinator, "mlp",
                       TRAIN + ["--step-delay-ms", str(step_delay_ms)],
                       env=env)
        for i in range(4):
            self.job.spawn(f"w{i}")
        return self.job

    def check_result(self, final_world_size):
        r = self.job.result()
        self.assertEqual(r["duplicate_samples"], 0, r["generations"])
        self.assertEqual(r["skipped_samples"], 0, r["generations"])
        self.assertEqual(r["inconsistent_steps"], 0)
        self.assertEqual(len(r["history"]), TOTAL // BATCH)
        self.assertEqual(r["final_world_size"], final_world_size)
        err = relative_error(r["weights"], ref()["weights"])
        self.assertLess(err, 1e-5, f"relative weight error {err}")
        # Most step boundaries were decided from the flag carried by the
        # gradient all-reduce, without a collective of their own; the
        # shim's boundary ran around the changes only (rank 0's counts,
        # over its last process's life).
        b = r["boundaries"]
        self.assertGreater(b["skipped"], 2 * b["full"], b)
        return r

    def reasons(self, r):
        return [(g["reason"], g["rolled_back"]) for g in r["generations"]]

    def test_shrink_to_two_and_grow_back(self):
        # Slower steps: two new processes (python, import torch) must join,
        # one after the other, before the run ends.
        job = self.start(step_delay_ms=150)
        w4 = job.spawn("w4", join_when="w4")
        w5 = job.spawn("w5", join_when="w5")
        job.wait_for(lambda p: p["position"] >= TOTAL * 2 // 10, 60,
                     "20 % of the samples")
        self.coordinator.resize("mlp", 2)  # w2, w3 leave
        job.wait_for(lambda p: p["world_size"] == 2, 30, "world size 2")
        job.expect_clean_exit("w2", 30)
        job.expect_clean_exit("w3", 30)
        # New processes fill the grown job as they join, one at a time
        # (started at once, so that python's start is not what is waited
        # for; each waits to join until told).
        self.coordinator.resize("mlp", 4)
        job.join(w4)
        job.wait_for(lambda p: p["world_size"] == 3, 40, "world size 3")
        job.join(w5)
        p = job.wait_for(lambda p: p["world_size"] == 4, 40, "world size 4")
        self.assertLess(p["position"], TOTAL, "grew only after the end")
        for w in ("w0", "w1", "w4", "w5"):
            job.expect_clean_exit(w)
        r = self.check_result(4)
        self.assertEqual(self.reasons(r), [
            ("initial", False), ("planned_shrink", False), ("grow", False),
            ("grow", False)])

    def test_grow_by_two_newcomers_a_few_ms_apart(self):
        # 4 -> 2, then two new processes join 5 ms apart (started early,
        # each waits for its moment): one grow generation, no rollback.
        job = self.start(step_delay_ms=100)
        both = job.spawn("w4", join_when="both")
        job.spawn("w5", ["--join-offset-ms", "5"], join_when="both")
        job.wait_for(lambda p: p["position"] >= TOTAL * 2 // 10, 60,
                     "20 % of the samples")
        self.coordinator.resize("mlp", 2)
        job.wait_for(lambda p: p["world_size"] == 2, 30, "world size 2")
        self.coordinator.resize("mlp", 4)
        job.join(both)  # w4 now, w5 5 ms later
        p = job.wait_for(lambda p: p["world_size"] == 4, 40, "world size 4")
        self.assertLess(p["position"], TOTAL, "grew only after the end")
        for w in ("w0", "w1", "w4", "w5"):
            job.expect_clean_exit(w)
        for w in ("w2", "w3"):
            job.expect_clean_exit(w, 5)
        r = self.check_result(4)
        self.assertEqual(self.reasons(r), [
            ("initial", False), ("planned_shrink", False), ("grow", False)])
        # One generation for both newcomers (not one each, the first then
        # skipped by the members): initial 1, shrink 2, grow 3.
        self.assertEqual(r["final_generation"], 3, r["generations"])

    def test_kill_nine_in_the_middle_of_an_all_reduce(self):
        job = self.start()
        job.wait_for(lambda p: p["position"] >= TOTAL * 3 // 10, 60,
                     "30 % of the samples")
        # Frozen, w2 leaves the others blocked in the step's all-reduce;
        # then it dies there.
        job.kill9("w2", stop_first=True)
        for w in ("w0", "w1", "w3"):
            job.expect_clean_exit(w)
        r = self.check_result(3)
        self.assertEqual(r["gradients"], "torch")
        self.assertIn(("failure", True), self.reasons(r))

    def test_kill_nine_mid_all_reduce_with_shim_gradients(self):
        # The same through the shim's revocable communicator (what the
        # NCCL backend uses, staged through host memory).
        job = self.start(env={"RINGMASTER_GRADIENTS": "shim"})
        job.wait_for(lambda p: p["position"] >= TOTAL * 3 // 10, 60,
                     "30 % of the samples")
        job.kill9("w2", stop_first=True)
        for w in ("w0", "w1", "w3"):
            job.expect_clean_exit(w)
        r = self.check_result(3)
        self.assertEqual(r["gradients"], "shim")
        self.assertIn(("failure", True), self.reasons(r))

    def test_a_peer_stuck_alive_is_left_behind_by_a_failure_generation(self):
        # w2 is frozen (SIGSTOP): alive, sockets open, so torch's Gloo
        # all-reduce of its peers never errs by itself. The coordinator's
        # heartbeat timeout publishes a failure generation; the survivors
        # abandon the blocked all-reduce and go on at 3 while w2 is still
        # frozen; then it is killed.
        self.coordinator.stop()
        self.coordinator = Coordinator(heartbeat_timeout_ms=2000)
        job = self.start()
        job.wait_for(lambda p: p["position"] >= TOTAL * 3 // 10, 60,
                     "30 % of the samples")
        proc = job.procs["w2"]
        os.kill(proc.pid, signal.SIGSTOP)
        job.wait_for(lambda p: p["world_size"] == 3, 30,
                     "world size 3 while w2 is frozen")
        job.kill9("w2")
        for w in ("w0", "w1", "w3"):
            job.expect_clean_exit(w)
        r = self.check_result(3)
        self.assertEqual(r["gradients"], "torch")
        self.assertGreaterEqual(r["abandoned_allreduces"], 1, r)
        self.assertIn(("failure", True), self.reasons(r))

    def test_kill_nine_of_rank_zero(self):
        job = self.start()
        job.wait_for(lambda p: p["position"] >= TOTAL * 3 // 10, 60,
                     "30 % of the samples")
        # Rank 0 holds the state the others sync from after a change, and
        # writes the result: w1 takes both over.
        job.kill9("w0")
        for w in ("w1", "w2", "w3"):
            job.expect_clean_exit(w)
        r = self.check_result(3)
        self.assertIn(("failure", True), self.reasons(r))

    def test_kill_during_rendezvous(self):
        job = self.start(env={"RINGMASTER_REFORM_DELAY_MS": "1000"})
        job.wait_for(lambda p: p["position"] >= TOTAL * 3 // 10, 60,
                     "30 % of the samples")
        gen = self.coordinator.resize("mlp", 3)  # w3 leaves; w0..w2 re-form
        self.assertGreaterEqual(gen, 2)
        # Inside the 1 s before the rendezvous: a thread of w1 (the shim's
        # preparing thread, or the training thread at the step boundary)
        # sits in the delay, a sleep longer than the 40 ms steps'.
        self.assertTrue(
            wait_until(SleepWatch(job.procs["w1"].pid, 0.15), 20),
            f"w1 never entered the re-formation's delay\n{job.logs()}")
        job.kill9("w1")
        for w in ("w0", "w2", "w3"):
            job.expect_clean_exit(w)
        r = self.check_result(2)
        self.assertIn(("failure", True), self.reasons(r))


if __name__ == "__main__":
    unittest.main()
