#!/usr/bin/python3
"""How much the final weights depend on the order in which a step's
gradient is summed, in one process: the same steps with each step's
gradient computed over the whole batch (one shard) and as the sum of the
gradients of S shards (what ranks summed by an all-reduce give), for SGD
with momentum and for Adam, in float32 and float64. docs/PYTORCH.md
(section 2) quotes the result: the reason a comparison with a
single-process reference needs float64 or a tolerance with Adam.

  /usr/bin/python3 bench/pytorch/summation_order.py --steps 1400 --shards 2
"""

from __future__ import annotations

import argparse

import torch


def train(opt_name: str, dtype, steps: int, shards: int, batch: int,
          dim: int, hidden: int, seed: int, adam_lr: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(steps * batch, dim, generator=g, dtype=torch.float64)
    w_true = torch.randn(dim, 1, generator=g, dtype=torch.float64)
    y = torch.tanh(x @ w_true) + 0.1 * torch.randn(steps * batch, 1,
                                                   generator=g,
                                                   dtype=torch.float64)
    x, y = x.to(dtype), y.to(dtype)
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.Tanh(),
                                torch.nn.Linear(hidden, 1)).to(dtype)
    if opt_name == "adam":
        opt = torch.optim.Adam(model.parameters(), lr=adam_lr)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    params = list(model.parameters())
    for step in range(steps):
        xb = x[step * batch:(step + 1) * batch]
        yb = y[step * batch:(step + 1) * batch]
        total = [torch.zeros_like(p) for p in params]
        for s in range(shards):
            opt.zero_grad()
            xs, ys = xb[s::shards], yb[s::shards]
            loss = ((model(xs) - ys) ** 2).sum() / batch
            loss.backward()
            for t, p in zip(total, params):
                t += p.grad
        for t, p in zip(total, params):
            p.grad = t
        opt.step()
    return torch.cat([p.detach().reshape(-1).to(torch.float64)
                      for p in params])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1400)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--adam-lr", type=float, default=1e-3)
    a = p.parse_args()
    torch.set_num_threads(1)
    for opt_name in ("sgd", "adam"):
        for dtype in (torch.float32, torch.float64):
            one = train(opt_name, dtype, a.steps, 1, a.batch, a.dim, a.hidden,
                        a.seed, a.adam_lr)
            many = train(opt_name, dtype, a.steps, a.shards, a.batch, a.dim,
                         a.hidden, a.seed, a.adam_lr)
            rel = float((one - many).norm() / one.norm())
            print(f"{opt_name:4s} {str(dtype).split('.')[-1]:7s} "
                  f"1 vs {a.shards} shards, {a.steps} steps: relative "
                  f"difference {rel:.1e}")


if __name__ == "__main__":
    main()
