#!/usr/bin/python3
"""Data-parallel training of an MLP from Python (docs/python.md "Distributed training").

Run one process per rank, with sgrt's launcher or torchrun-style variables:

    sgrt launch -n 4 -- /usr/bin/python3 examples/python/train_dist.py --steps 20
    RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 python3 train_dist.py &  # and RANK=1

Each step's global batch (--batch samples, from a fixed generated dataset) is split into one shard
per original rank; the feed callback sets a shard's inputs, so the job heals around a lost rank (its
shard is run by the others: the same global batch, the same parameters). Rank 0 prints one line per
step on stderr and, with --json, one JSON object on stdout at the end (params_hash as the C examples).
"""

import argparse
import json
import sys
import time

import numpy as np

try:
    import sgrt
except ImportError:  # not installed (pip install ./python): the package of the repository this example is in
    import os.path
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    import sgrt

FEATURES, HIDDEN, CLASSES = 16, 32, 4


def rnd(key, n):
    """Elements 0..n-1 of stream `key` of the generator examples/mlp_dist.c uses: splitmix64's
    finalizer of key + (i + 1) * golden, its top 24 bits scaled into [-1, 1) exactly (float32), so
    that C and numpy make the same bits."""
    with np.errstate(over="ignore"):
        z = np.uint64(key) + (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return (z >> np.uint64(40)).astype(np.float32) * np.float32(2.0 ** -23) - np.float32(1.0)


def stream(seed, what):
    """The streams: one per weight, one per step's data (as mlp_dist.c)."""
    return (seed * 0x100000001B3 + what * 0x51ED27) % (1 << 64)


def build(batch_per_shard, seed=0):
    """The training graph of one shard, built in mlp_dist.c's order: linear-relu-linear, mean cross
    entropy, SGD with momentum 0.9."""
    g = sgrt.Graph()
    x = g.input("x", "f32", (batch_per_shard, FEATURES))
    y = g.input("y", "i64", (batch_per_shard,))
    lr = g.input("lr", "f32", ())
    w1 = g.parameter("fc1.weight", rnd(stream(seed, 1), HIDDEN * FEATURES).reshape(HIDDEN, FEATURES) * np.float32(0.25))
    b1 = g.parameter("fc1.bias", np.zeros(HIDDEN, np.float32))
    w2 = g.parameter("fc2.weight", rnd(stream(seed, 2), CLASSES * HIDDEN).reshape(CLASSES, HIDDEN) * np.float32(0.125))
    b2 = g.parameter("fc2.bias", np.zeros(CLASSES, np.float32))
    logits = g.mark_output(g.linear(g.relu(g.linear(x, w1, b1)), w2, b2), "logits")
    loss = g.mark_output(g.cross_entropy(logits, y), "loss")
    g.backward(loss)
    g.add_sgd(lr, momentum=0.9)
    g.finalize()
    return g


def global_batch(step, batch, seed=0):
    """Step `step`'s global batch (as mlp_dist.c): sample b's features are elements b*F.. of the
    step's stream; its class is the index of the largest of its first CLASSES features."""
    x = rnd(stream(seed, 1000 + step), batch * FEATURES).reshape(batch, FEATURES)
    y = x[:, :CLASSES].argmax(axis=1).astype(np.int64)
    return x, y


def shard_of(step, shard, n_shards, batch, seed=0):
    x, y = global_batch(step, batch, seed)
    per = batch // n_shards
    return x[shard * per:(shard + 1) * per], y[shard * per:(shard + 1) * per]


def train(steps, batch, lr, threads=1, seed=0, quiet=False, **params):
    """Trains on every rank of the job; returns the Dist's last stats and the params hash."""
    import os
    world = int(os.environ.get("SG_WORLD_SIZE") or os.environ.get("WORLD_SIZE") or 1)
    shards = world * params.get("micro_batches", 1)  # the graph takes one shard: a micro-batch of a rank
    if batch % shards:
        raise SystemExit("train_dist.py: --batch %d is not a multiple of the %d shards (ranks x micro-batches)"
                         % (batch, shards))
    g = build(batch // shards, seed)

    def feed(d, step, shard, n_shards):
        x, y = shard_of(step, shard, n_shards, batch, seed)
        d.set_input("x", x)
        d.set_input("y", y)
        d.set_input("lr", np.float32(lr))

    with sgrt.Dist(g, feed=feed, threads=threads, seed=seed, **params) as d:
        t0 = time.perf_counter()
        for step in range(steps):
            st = d.step()
            if d.rank == 0 and not quiet:
                print("step %d/%d  loss %.4f  %.0f samples/s  healthy %d/%d" % (
                    step + 1, steps, st["loss_mean"], batch / (st["step_ms"] / 1e3), st["healthy_ranks"], world),
                    file=sys.stderr)
        seconds = time.perf_counter() - t0
        params = {n: d.read(n) for n in ("fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")}
        return d.rank, d.size, st, d.params_hash(), params, seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--steps", type=int, default=20, help="training steps (default 20)")
    ap.add_argument("--batch", type=int, default=64, help="global batch, split over the ranks (default 64)")
    ap.add_argument("--lr", type=float, default=0.05, help="learning rate (default 0.05)")
    ap.add_argument("--threads", type=int, default=1, help="compute threads per rank (default 1)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights and the data (default 0)")
    ap.add_argument("--json", action="store_true", help="rank 0 prints one JSON object on stdout at the end")
    ap.add_argument("--save-params", metavar="FILE", help="rank 0 saves the final parameters (numpy .npz)")
    ap.add_argument("--micro-batches", type=int, default=1, help="micro-batches per shard (default 1)")
    ap.add_argument("--zero", action="store_true", help="ZeRO-1: each rank keeps a share of the optimizer state")
    ap.add_argument("--qos", default="strict", help="strict (default), best-effort or graceful-degrade")
    a = ap.parse_args()
    if a.steps < 1 or a.batch < 1 or not a.lr > 0 or a.threads < 0:
        ap.error("--steps and --batch must be positive, --lr > 0, --threads >= 0")
    rank, size, st, h, params, seconds = train(a.steps, a.batch, a.lr, a.threads, a.seed,
                                               micro_batches=a.micro_batches, zero=1 if a.zero else 0, qos=a.qos)
    if rank == 0 and a.save_params:
        np.savez(a.save_params, **params)
    if rank == 0:
        summary = {"example": "train_dist.py", "world_size": size, "steps": a.steps, "batch": a.batch,
                   "final_loss": st["loss_mean"], "recoveries": st["recoveries"], "params_hash": h,
                   "micro_batches": a.micro_batches, "shards": st["shards"], "qos": a.qos,
                   "optimizer_state_bytes": st["optimizer_state_bytes"],
                   "optimizer_state_total": st["optimizer_state_total"],
                   "seconds": seconds}
        if a.json:
            print(json.dumps(summary))
        else:
            print("done: %d ranks, %d steps, final loss %.4f, params_hash %s" % (size, a.steps, st["loss_mean"], h))


if __name__ == "__main__":
    main()
