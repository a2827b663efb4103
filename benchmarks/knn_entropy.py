"""PEBBLE's k-NN state-entropy reward, per SAC update: prefrl's (distances by matmul, k+1 passes
of min) against the obvious formulation (broadcast differences, `lax.top_k`, which XLA sorts on
the CPU), same inputs, same run.

    python benchmarks/knn_entropy.py --batch 256 --reference 8192 --obs-dim 24 --repeats 30

Inputs are a batch of next observations and a reference sample of stored observations (dmc
walker: 24 dims); both functions are jitted and warmed up first; median of `--repeats` calls.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from prefrl.reward.knn_entropy import KnnEntropyReward

RESULTS = Path(__file__).parent / "results" / "knn_entropy.json"


def top_k_baseline(k: int):
    def dist(x, ref):
        d2 = ((x[:, None, :] - ref[None, :, :]) ** 2).sum(-1)
        return jnp.sqrt(jnp.maximum(-jax.lax.top_k(-d2, k + 1)[0][:, -1], 0.0))

    return jax.jit(dist)


def median_ms(fn, x, ref, repeats: int) -> float:
    fn(x, ref).block_until_ready()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(x, ref).block_until_ready()
        times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--reference", type=int, default=8192)
    parser.add_argument("--obs-dim", type=int, default=24)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.obs_dim)).astype(np.float32)
    ref = rng.normal(size=(args.reference, args.obs_dim)).astype(np.float32)
    ours, baseline = KnnEntropyReward(args.k)._dist, top_k_baseline(args.k)
    np.testing.assert_allclose(ours(x, ref), baseline(x, ref), rtol=1e-4, atol=1e-4)
    result = {
        "command": "python benchmarks/knn_entropy.py " + " ".join(sys.argv[1:]),
        **vars(args),
        "prefrl_ms": median_ms(ours, x, ref, args.repeats),
        "top_k_ms": median_ms(baseline, x, ref, args.repeats),
    }
    result["speedup"] = result["top_k_ms"] / result["prefrl_ms"]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"k-NN reward, batch {args.batch} x reference {args.reference} x {args.obs_dim} dims: "
        f"prefrl {result['prefrl_ms']:.1f} ms, lax.top_k {result['top_k_ms']:.1f} ms "
        f"({result['speedup']:.1f}x)"
    )


if __name__ == "__main__":
    main()
