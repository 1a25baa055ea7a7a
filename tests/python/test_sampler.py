"""ElasticSampler: each sample exactly once per epoch across world-size
changes, the same order on every rank, position saved and restored."""

import unittest

from harness import require_torch


class ElasticSamplerTest(unittest.TestCase):
    def setUp(self):
        require_torch(self)
        from ringmaster.torch import ElasticSampler
        self.Sampler = ElasticSampler


    def test_every_sample_once_while_the_world_changes(self):
        n, batch = 103, 8  # 13 steps, the last one of 7 samples
        worlds = [4, 4, 3, 2, 2, 4, 1, 5, 5, 3, 3, 2, 8]
        seen = []
        s = self.Sampler(n, batch, shuffle=True, seed=5)
        for w in worlds:
            state = s.state_dict()
            for r in range(w):
                s.load_state_dict(state)  # every rank starts at the same point
                s.set_world(r, w)
                seen.extend(next(iter(s)))
        self.assertEqual(s.position, n)  # the epoch's last step handed out
        self.assertEqual(sorted(seen), list(range(n)))  # each sample once

    def test_order_depends_on_seed_and_epoch_only(self):
        a = self.Sampler(50, 50, seed=3)
        b = self.Sampler(50, 50, seed=3)
        self.assertEqual(next(iter(a)), next(iter(b)))
        c = self.Sampler(50, 50, seed=3)
        c.epoch = 1
        second = next(iter(c))
        self.assertNotEqual(next(iter(self.Sampler(50, 50, seed=3))), second)
        self.assertEqual(sorted(second), list(range(50)))

    def test_epoch_advances_when_iteration_ends(self):
        s = self.Sampler(10, 4, shuffle=False)
        self.assertEqual([len(i) for i in s], [4, 4, 2])
        self.assertEqual((s.epoch, s.position), (1, 0))

    def test_restore_returns_to_the_saved_position(self):
        s = self.Sampler(64, 8, shuffle=False)
        it = iter(s)
        next(it)
        saved = s.state_dict()
        first_after = next(it)
        next(it)
        s.load_state_dict(saved)
        self.assertEqual(next(iter(s)), first_after)

    def test_rank_share_is_strided_within_the_step(self):
        s = self.Sampler(20, 8, shuffle=False)
        s.set_world(1, 3)
        self.assertEqual(next(iter(s)), [1, 4, 7])
        self.assertEqual(s.step_samples, 8)

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            self.Sampler(0, 4)
        s = self.Sampler(4, 4)
        with self.assertRaises(ValueError):
            s.set_world(2, 2)


if __name__ == "__main__":
    unittest.main()
