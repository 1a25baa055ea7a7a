#!/usr/bin/python3
"""Elastic DDP training of a small MLP on synthetic regression data, on the
ringmaster shim (docs/PYTORCH.md).

Deterministic given --seed: the data, the initial weights and the sample
order depend on the seed only, and each step's update is the gradient of
the step's global batch (the loss is the batch's squared-error sum over the
step's global size), so any membership history ends at the weights of the
single-process run over the same samples (--reference).

Run under the launcher, one process per worker:

  ringmaster coordinator --listen 127.0.0.1:7070 &
  for i in 0 1 2 3; do
    ringmaster shim run --mode inprocess --coordinator 127.0.0.1:7070 \\
      --job mlp --worker w$i --workers 4 -- \\
      /usr/bin/python3 examples/pytorch/train_mlp.py --out /tmp/mlp.json &
  done
  ringmaster resize mlp --workers 2 --coordinator 127.0.0.1:7070

--check all-reduces, beside the gradients, one indicator per sample of the
step and each rank's step position (sum and sum of squares): a sample
counted 0 or 2 times, or ranks at different positions, is reported and
makes the run fail. Rank 0 writes --out (JSON): the final weights, the
history of committed steps, the duplicate / skipped sample counts over the
whole run, the generations it went through.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=4096)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=64, help="global batch")
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--commit-every", type=int, default=4)
    p.add_argument("--boundary-every", type=int, default=1,
                   help="step boundary (membership check) every K steps; "
                   "a planned change then waits up to K + 1 steps")
    p.add_argument("--step-delay-ms", type=float, default=0.0,
                   help="sleep per step (tests: keep the job running)")
    p.add_argument("--check", action="store_true",
                   help="verify every step's samples and positions")
    p.add_argument("--reference", action="store_true",
                   help="single process, no ringmaster, no DDP")
    p.add_argument("--plain-ddp", action="store_true",
                   help="plain torch DDP under torchrun (benchmarks)")
    p.add_argument("--out", default="", help="rank 0 writes the result here")
    p.add_argument("--progress", default="",
                   help="rank 0 rewrites this after every commit")
    p.add_argument("--step-log", default="",
                   help="rank 0 appends one line per completed step")
    p.add_argument("--pg-timeout-s", type=float, default=30.0)
    p.add_argument("--print-every", type=int, default=0,
                   help="rank 0 prints progress every K steps")
    p.add_argument("--join-when", default="",
                   help="tests: before joining, wait for this file to hold a "
                   "unix time, then until that time plus --join-offset-ms "
                   "(a process started early joins at a chosen moment)")
    p.add_argument("--join-offset-ms", type=float, default=0.0)
    p.add_argument("--max-seconds", type=float, default=0,
                   help="exit with status 124 after this long (tests: no "
                   "worker outlives its test)")
    return p.parse_args(argv)


def make_data(a):
    g = torch.Generator().manual_seed(a.seed)
    dt = getattr(torch, a.dtype)
    x = torch.randn(a.samples, a.dim, generator=g, dtype=torch.float64)
    teacher = torch.randn(a.dim, 1, generator=g, dtype=torch.float64)
    y = torch.tanh(x @ teacher) + 0.1 * torch.randn(a.samples, 1, generator=g,
                                                    dtype=torch.float64)
    return x.to(dt), y.to(dt)


def make_model(a):
    torch.manual_seed(a.seed)
    m = torch.nn.Sequential(torch.nn.Linear(a.dim, a.hidden), torch.nn.Tanh(),
                            torch.nn.Linear(a.hidden, 1))
    return m.to(getattr(torch, a.dtype))


def flat_weights(model):
    return torch.cat([p.detach().reshape(-1).to(torch.float64)
                      for p in model.parameters()])


def coverage(history, a):
    """Duplicate and skipped samples over the committed step history."""
    counts = torch.zeros(a.epochs, a.samples, dtype=torch.int64)
    for epoch, pos, n in history:
        counts[epoch, pos:pos + n] += 1
    dup = int((counts - 1).clamp(min=0).sum())
    skipped = int((counts == 0).sum())
    return dup, skipped


def phases_ms(r):
    """A re-formation's phase ends, in ms after its publication."""
    t0 = r.published_unix_us / 1e6
    out = {"shim_boundary": r.boundary_unix_us / 1e6 - t0,
           "shim_formed": r.formed_unix_us / 1e6 - t0}
    out.update({k: v - t0 for k, v in getattr(r, "phases", {}).items()})
    return {k: round(v * 1000, 1) for k, v in out.items()}


def write_json(path, obj):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def step_log(a, rank, line):
    if a.step_log and rank == 0:
        with open(a.step_log, "a") as f:
            f.write(line + "\n")


def run_reference(a):
    """One process, the same global steps, no DDP."""
    import ringmaster.torch as rmt  # only for the sampler: no shim involved
    x, y = make_data(a)
    model = make_model(a)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    sampler = rmt.ElasticSampler(a.samples, a.batch, shuffle=True, seed=a.seed)
    history = []
    while sampler.epoch < a.epochs:
        epoch = sampler.epoch
        for idx in sampler:
            opt.zero_grad()
            loss = ((model(x[idx]) - y[idx]) ** 2).sum() / sampler.step_samples
            loss.backward()
            opt.step()
            history.append([epoch, sampler.step_position, sampler.step_samples])
    dup, skipped = coverage(history, a)
    result = {"weights": flat_weights(model).tolist(), "history": history,
              "duplicate_samples": dup, "skipped_samples": skipped,
              "final_world_size": 1, "generations": []}
    if a.out:
        write_json(a.out, result)
    return 0


def run_plain_ddp(a):
    """torchrun's worker: plain DDP, restarted from scratch by torchrun on
    any membership change (for bench/pytorch)."""
    import torch.distributed as dist
    import ringmaster.torch as rmt
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = make_data(a)
    model = make_model(a)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    sampler = rmt.ElasticSampler(a.samples, a.batch, shuffle=True, seed=a.seed)
    sampler.set_world(rank, world)
    step_log(a, rank, f"start {time.time():.6f} world {world}")
    step = 0
    while sampler.epoch < a.epochs:
        for idx in sampler:
            if a.step_delay_ms > 0:
                time.sleep(a.step_delay_ms / 1000)
            opt.zero_grad()
            # DDP averages over the ranks: scale the sum so the average is
            # the global batch's gradient.
            loss = ((ddp(x[idx]) - y[idx]) ** 2).sum() * world / sampler.step_samples
            loss.backward()
            opt.step()
            step += 1
            step_log(a, rank, f"step {time.time():.6f} {step} world {world}")
    dist.destroy_process_group()
    return 0


def wait_to_join(path, offset_ms):
    """--join-when: the file's unix time plus the offset."""
    while True:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                break
        except OSError:
            pass
        time.sleep(0.005)
    time.sleep(max(0.0, float(text) + offset_ms / 1000 - time.time()))


def run_elastic(a):
    import ringmaster.torch as rmt
    import datetime

    # Ready to train before joining: a newcomer that joins keeps the others
    # waiting until it has built its data and model.
    x, y = make_data(a)
    model = make_model(a)
    if a.join_when:
        wait_to_join(a.join_when, a.join_offset_ms)
    ctx = rmt.init(pg_timeout=datetime.timedelta(seconds=a.pg_timeout_s))
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    sampler = rmt.ElasticSampler(a.samples, a.batch, shuffle=True, seed=a.seed)
    state = rmt.ElasticState(model=model, optimizer=opt, sampler=sampler,
                             step=0, history=[])
    errors = {"duplicate": 0, "skipped": 0, "inconsistent": 0}
    step_log(a, ctx.rank, f"start {time.time():.6f} world {ctx.world_size}")

    @rmt.elastic.run
    def train(state):
        s = state.sampler
        if ctx.reforms:  # called again after every re-formation
            r = ctx.reforms[-1]
            step_log(a, ctx.rank, f"reform {time.time():.6f} gen "
                     f"{r.generation} world {r.world_size} pub "
                     f"{r.published_unix_us / 1e6:.6f} "
                     f"{json.dumps(phases_ms(r), separators=(',', ':'))}")
        while s.epoch < a.epochs:
            epoch = s.epoch
            for idx in s:
                if a.step_delay_ms > 0:
                    time.sleep(a.step_delay_ms / 1000)
                rank, world = ctx.rank, ctx.world_size
                state.optimizer.zero_grad()
                out = state.ddp_model(x[idx])
                loss = ((out - y[idx]) ** 2).sum() / s.step_samples
                loss.backward()  # gradients summed over the ranks (the shim)
                if a.check:
                    ind = torch.zeros(s.step_samples + 2, dtype=torch.float64)
                    ind[rank:s.step_samples:world] = 1
                    ind[-2] = s.step_position
                    ind[-1] = float(s.step_position) ** 2
                    rmt.allreduce_(ind)
                    counts = ind[:-2]
                    errors["duplicate"] += int((counts > 1.5).sum())
                    errors["skipped"] += int((counts < 0.5).sum())
                    p = float(s.step_position)
                    if ind[-2] != world * p or ind[-1] != world * p * p:
                        errors["inconsistent"] += 1
                state.optimizer.step()
                state.step += 1
                state.history.append([epoch, s.step_position, s.step_samples])
                step_log(a, rank, f"step {time.time():.6f} {state.step} "
                         f"world {world} gen {ctx.generation}")
                if a.print_every and rank == 0 and state.step % a.print_every == 0:
                    print(f"step {state.step} epoch {s.epoch} world {world} "
                          f"generation {ctx.generation} loss {loss.item():.5f}",
                          file=sys.stderr, flush=True)
                if state.step % a.commit_every == 0:
                    state.commit()
                    if a.progress and rank == 0:
                        write_json(a.progress, {
                            "step": state.step, "generation": ctx.generation,
                            "world_size": ctx.world_size,
                            "position": s.epoch * s.num_samples + s.position})
                elif state.step % a.boundary_every == 0:
                    state.check_host_updates()
        return state

    done = train(state)
    if done is None:
        print(f"{os.environ.get('RINGMASTER_WORKER', '?')}: removed",
              file=sys.stderr)
        return 0
    rank, world, gen = ctx.rank, ctx.world_size, ctx.generation
    if rank == 0 and a.out:
        dup, skipped = coverage(state.history, a)
        write_json(a.out, {
            "weights": flat_weights(model).tolist(),
            "history": state.history,
            "duplicate_samples": dup + errors["duplicate"],
            "skipped_samples": skipped + errors["skipped"],
            "inconsistent_steps": errors["inconsistent"],
            "steps": state.step, "final_world_size": world,
            "final_generation": gen,
            # Step boundaries decided from the flag on the gradient
            # all-reduce (no collective) and those that ran the shim's.
            "boundaries": {"skipped": ctx.boundaries_skipped,
                           "full": ctx.boundaries_full},
            # What carried the gradient all-reduce, and how many of rank
            # 0's were abandoned (blocked on a peer when a failure
            # generation came).
            "gradients": ctx.gradients,
            "abandoned_allreduces": ctx.abandoned_total,
            "generations": [{"generation": r.generation,
                             "reason": r.reason.name.lower(),
                             "world_size": r.world_size,
                             "rolled_back": r.rolled_back,
                             "reform_ms": (r.synced_unix_us -
                                           r.published_unix_us) / 1e3,
                             # ms from the publication to the end of each
                             # phase: the shim's communicator, then
                             # ringmaster.torch's process group, sync, DDP
                             "phases_ms": phases_ms(r)}
                            for r in ctx.reforms]})
    rmt.shutdown(finished=True)
    print(f"{os.environ.get('RINGMASTER_WORKER', '?')}: done, rank {rank} of "
          f"{world}, generation {gen}", file=sys.stderr)
    return 0 if sum(errors.values()) == 0 else 3


def main(argv=None):
    a = parse_args(argv)
    torch.set_num_threads(1)
    if a.max_seconds > 0:
        import threading
        t = threading.Timer(a.max_seconds, lambda: os._exit(124))
        t.daemon = True
        t.start()
    if a.reference:
        return run_reference(a)
    if a.plain_ddp:
        return run_plain_ddp(a)
    return run_elastic(a)


if __name__ == "__main__":
    sys.exit(main())
