"""ringmaster.torch's CUDA path, through the same interface as the CPU one:
with CUDA present, init() creates an NCCL process group, puts the worker
on its GPU (RINGMASTER_CUDA_DEVICE / LOCAL_RANK) and keeps the shim on
Gloo; the gradient hook and allreduce_ stage a device tensor through host
memory around the shim's all-reduce; DDP gets device_ids; the state sync
maps the sender's CUDA tensors onto this worker's GPU.

Debian's python3-torch has no CUDA, so the first class mocks it (torch.cuda
and a fake shim); the second runs the real thing on a GPU and skips, saying
so, where CUDA is absent. Neither has run on a GPU here.
"""

import ctypes
import datetime
import os
import unittest
from unittest import mock

from harness import Coordinator, require_torch


class FakeShim:
    """Stands in for ringmaster.Shim: a world of `world` that sums by
    scaling (every rank holds the same values)."""

    instances = []

    def __init__(self, coordinator=None, job=None, worker=None,
                 desired_workers=0, backend="gloo", world=2):
        self.backend = backend
        self.rank, self.world_size, self.generation = 0, world, 1
        self.reduced = []  # (address, count) of every all-reduce
        FakeShim.instances.append(self)

    def start(self):
        pass

    def latest_generation(self):
        return self.generation

    def allreduce(self, address, count, dtype, op):
        self.reduced.append((address, count))
        values = (ctypes.c_float * count).from_address(address)
        for i in range(count):
            values[i] *= self.world_size

    def close(self):
        pass


class FakeDeviceTensor:
    """A float32 tensor "on" a CUDA device, for the staging code: its
    values live in a CPU tensor, which the code must not touch directly.
    It counts its copies to host memory (``host.copy_(this)``, through
    torch's __torch_function__ protocol, or ``.to("cpu")``) and back
    (``this.copy_(host)``)."""

    def __init__(self, values, device):
        self.values = values
        self.device = device
        self.dtype = values.dtype
        self.to_host = 0
        self.from_host = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        import torch
        if func is torch.Tensor.copy_ and isinstance(args[1], cls):
            args[1].to_host += 1
            return args[0].copy_(args[1].values)
        raise AssertionError(f"a device tensor used on the host: {func}")

    def is_contiguous(self):
        return True

    def numel(self):
        return self.values.numel()

    def detach(self):
        return self

    def to(self, device):
        assert str(device) == "cpu"
        self.to_host += 1
        return self.values.clone()

    def copy_(self, src):
        assert src.device.type == "cpu"
        self.from_host += 1
        self.values.copy_(src)
        return self

    def data_ptr(self):
        return self.values.data_ptr()


class CudaMocked(unittest.TestCase):
    def setUp(self):
        require_torch(self)
        import torch
        import torch.distributed as dist
        from ringmaster.torch import _context
        self.torch, self.dist, self.ctxmod = torch, dist, _context
        FakeShim.instances.clear()

    def tearDown(self):
        self.ctxmod._context = None

    def cuda(self, available=True, count=2, current=0):
        """Patches torch.cuda as a machine with `count` GPUs would show."""
        t = self.torch
        for name, value in (("is_available", available),
                            ("device_count", count),
                            ("current_device", current)):
            p = mock.patch.object(t.cuda, name, return_value=value)
            p.start()
            self.addCleanup(p.stop)
        p = mock.patch.object(self.dist, "is_nccl_available",
                              return_value=available)
        p.start()
        self.addCleanup(p.stop)
        set_device = mock.patch.object(t.cuda, "set_device")
        self.addCleanup(set_device.stop)
        return set_device.start()

    def test_backend_is_nccl_where_cuda_exists(self):
        self.cuda(available=True)
        self.assertEqual(self.ctxmod.choose_backend(), "nccl")
        self.assertEqual(self.ctxmod.choose_backend("gloo"), "gloo")

    def test_backend_is_gloo_without_cuda(self):
        self.cuda(available=False)
        self.assertEqual(self.ctxmod.choose_backend(), "gloo")
        with self.assertRaisesRegex(ValueError, "needs CUDA"):
            self.ctxmod.choose_backend("nccl")
        with self.assertRaisesRegex(ValueError, "'gloo' or 'nccl'"):
            self.ctxmod.choose_backend("mpi")

    def test_init_forms_an_nccl_process_group_on_this_workers_gpu(self):
        set_device = self.cuda(available=True, count=2)
        formed = []
        with mock.patch.object(self.ctxmod, "Shim", FakeShim), \
                mock.patch.dict(os.environ, {"RINGMASTER_CUDA_DEVICE": "1"}), \
                mock.patch.object(self.dist, "is_initialized",
                                  return_value=False), \
                mock.patch.object(self.dist, "init_process_group",
                                  side_effect=lambda b, **kw: formed.append(
                                      (b, kw["rank"], kw["world_size"]))):
            ctx = self.ctxmod.init(coordinator="x", job="j", worker="w")
        self.assertEqual(formed, [("nccl", 0, 2)])
        self.assertEqual(FakeShim.instances[0].backend, "gloo")
        self.assertEqual(ctx.backend, "nccl")
        self.assertEqual(ctx.device, self.torch.device("cuda", 1))
        set_device.assert_called_with(1)

    def test_missing_gpu_is_a_clear_error(self):
        self.cuda(available=True, count=1)
        with mock.patch.dict(os.environ, {"RINGMASTER_CUDA_DEVICE": "3"}):
            with self.assertRaisesRegex(ValueError, "CUDA device 3 does not "
                                        "exist \\(1 visible"):
                self.ctxmod.choose_device("nccl")
        self.assertEqual(self.ctxmod.choose_device("gloo").type, "cpu")

    def test_gradient_hook_stages_a_device_bucket_through_host_memory(self):
        t = self.torch
        shim = FakeShim(world=2)
        ctx = self.ctxmod.Context(shim, "nccl", datetime.timedelta(seconds=1),
                                  t.device("cuda", 1))
        grads = t.tensor([1.0, 2.0, 3.0])
        buf = FakeDeviceTensor(grads, t.device("cuda", 1))
        bucket = mock.Mock()
        bucket.buffer.return_value = buf
        bucket.index.return_value = 0
        fut = ctx.ddp_comm_hook(None, bucket)
        self.assertIs(fut.value(), buf)
        self.assertEqual(grads.tolist(), [2.0, 4.0, 6.0])  # summed, back
        # Reduced once, from a host copy (one more element: the step
        # boundary's flag), not at the device tensor's address; one copy
        # each way.
        self.assertEqual(len(shim.reduced), 1)
        self.assertNotEqual(shim.reduced[0][0], grads.data_ptr())
        self.assertEqual(shim.reduced[0][1], 4)
        self.assertEqual((buf.to_host, buf.from_host), (1, 1))
        # The next step reuses the host buffer.
        ctx.ddp_comm_hook(None, bucket)
        self.assertEqual(shim.reduced[1][0], shim.reduced[0][0])
        self.assertEqual(grads.tolist(), [4.0, 8.0, 12.0])
        # A CPU tensor is reduced in place.
        cpu = t.tensor([1.0])
        ctx.allreduce_(cpu)
        self.assertEqual(shim.reduced[2][0], cpu.data_ptr())
        self.assertEqual(cpu.tolist(), [2.0])
        # A device tensor through allreduce_: to host, reduced, back.
        values = t.tensor([5.0, 7.0])
        dev = FakeDeviceTensor(values, t.device("cuda", 1))
        self.assertIs(ctx.allreduce_(dev), dev)
        self.assertEqual(values.tolist(), [10.0, 14.0])
        self.assertNotEqual(shim.reduced[3][0], values.data_ptr())
        self.assertEqual((dev.to_host, dev.from_host), (1, 1))

    def test_ddp_gets_the_device_and_sync_maps_onto_it(self):
        t = self.torch
        from ringmaster.torch import ElasticState, state as statemod
        ctx = self.ctxmod.Context(FakeShim(), "nccl",
                                  datetime.timedelta(seconds=1),
                                  t.device("cuda", 1))
        self.ctxmod._context = ctx
        model = t.nn.Linear(2, 1)
        st = ElasticState(model=model)
        with mock.patch.object(t.nn.parallel, "DistributedDataParallel") as d:
            st.on_reform()
        d.assert_called_once()
        self.assertEqual(d.call_args.kwargs["device_ids"], [1])
        d.return_value.register_comm_hook.assert_called_once_with(
            None, ctx.ddp_comm_hook)
        place = statemod._onto(ctx.device)
        storage = mock.Mock()
        self.assertIs(place(storage, "cuda:0"), storage.cuda.return_value)
        storage.cuda.assert_called_once_with(1)
        self.assertIs(place(storage, "cpu"), storage)
        self.assertIsNone(statemod._onto(t.device("cpu")))


class OnCuda(unittest.TestCase):
    """The real NCCL path, one worker on one GPU: an NCCL process group
    over CoordinatorStore, DDP on the GPU, the gradient through the shim."""

    def setUp(self):
        require_torch(self)
        import torch
        if not torch.cuda.is_available():
            self.skipTest("no CUDA in this torch (Debian's python3-torch is "
                          "CPU-only): the NCCL path runs only where CUDA "
                          "exists; CudaMocked covered its logic")
        self.torch = torch
        self.coordinator = Coordinator()
        self.addCleanup(self.coordinator.stop)

    def test_one_step_on_the_gpu(self):
        t = self.torch
        import ringmaster.torch as rmt
        ctx = rmt.init(desired_workers=1, coordinator=self.coordinator.address,
                       job="cuda", worker="w0")
        self.addCleanup(rmt.shutdown)
        self.assertEqual(ctx.backend, "nccl")
        t.manual_seed(0)
        model = t.nn.Linear(4, 1).to(ctx.device)
        reference = t.nn.Linear(4, 1).to(ctx.device)
        reference.load_state_dict(model.state_dict())
        st = rmt.ElasticState(model=model)
        st.on_reform()
        # One GPU, one rank (NCCL refuses two ranks on one device): the sum
        # over a world of one would be this rank's own gradient, whether or
        # not it went through the shim and back. So the shim's all-reduce
        # is wrapped to stand for a world of 3 whose other ranks hold the
        # same gradients (each value tripled on the host, the membership
        # flag 0 stays 0): the GPU's gradient must come back tripled.
        from ringmaster._shim import DType
        real = ctx.shim.allreduce
        reduced = []

        def world_of_three(address, count, dtype, op):
            real(address, count, dtype, op)
            ctype = ctypes.c_float if dtype == DType.FLOAT32 else ctypes.c_double
            values = (ctype * count).from_address(address)
            for i in range(count):
                values[i] *= 3
            reduced.append(count)

        ctx.shim.allreduce = world_of_three
        self.addCleanup(setattr, ctx.shim, "allreduce", real)
        x = t.randn(8, 4, device=ctx.device)
        st.ddp_model(x).sum().backward()
        reference(x).sum().backward()
        # One bucket: weight (4) and bias (1), plus the flag.
        self.assertEqual(reduced, [6])
        self.assertTrue(t.allclose(model.weight.grad, 3 * reference.weight.grad),
                        (model.weight.grad, reference.weight.grad))
        self.assertTrue(t.allclose(model.bias.grad, 3 * reference.bias.grad))


if __name__ == "__main__":
    unittest.main()
