"""The Gaussian mixture the benchmarks run on: `clusters` centres drawn from N(0, 16 I), each row a
centre picked at random plus N(0, I) noise, all from numpy's default_rng(seed). The benchmarks write
it to a file once, so every tool timed on it reads the same numbers.

  mixture.py N D OUT.fvecs [--clusters C] [--seed S]
Needs only numpy (any python3 with numpy: the GPU machine's too).
"""
import argparse

import numpy as np


def gaussian_mixture(n, d, clusters=1000, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, d)).astype(np.float32) * 4
    return centres[rng.integers(0, clusters, n)] + rng.normal(size=(n, d)).astype(np.float32)


def write_fvecs(path, rows):
    """TEXMEX .fvecs: each row as int32 d, then d float32 (little-endian)."""
    n, d = rows.shape
    words = np.empty((n, d + 1), dtype="<i4")
    words[:, 0] = d
    words[:, 1:] = rows.astype("<f4").view("<i4")
    words.tofile(path)


def arguments(prog, doc):
    """The options every mixture script takes: N D OUT [--clusters C] [--seed S]."""
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", type=int)
    parser.add_argument("d", type=int)
    parser.add_argument("out")
    parser.add_argument("--clusters", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    return parser


def main():
    args = arguments("mixture.py", __doc__).parse_args()
    write_fvecs(args.out, gaussian_mixture(args.n, args.d, args.clusters, args.seed))


if __name__ == "__main__":
    main()
