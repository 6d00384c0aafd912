"""Large Gaussian mixtures for the out-of-memory runs, written straight to disk in parallel: `clusters`
centres drawn from N(0, 16 I), each row a centre picked at random plus N(0, I) noise, stored as
float16 (.npy) or, for uint8 (.u8bin), scaled by 8 and shifted by 128, clipped to 0-255 and
rounded. Each block of 1,048,576 rows comes from numpy's default_rng((seed, block)), so a file's
bytes do not depend on the number of worker processes.

  big_mixture.py N D OUT.npy|OUT.u8bin [--clusters C] [--seed S] [--workers W]
Needs only numpy (any python3 with numpy: the GPU machine's too). Memory: a few blocks per worker.
"""
import multiprocessing
import os

import numpy as np

from mixture import arguments

BLOCK_ROWS = 1 << 20


def centres(d, clusters, seed):
    return np.random.default_rng((seed, 1 << 40)).normal(size=(clusters, d)).astype(np.float32) * 4


def block_values(block, n, d, clusters, seed, dtype):
    rows = min(BLOCK_ROWS, n - block * BLOCK_ROWS)
    rng = np.random.default_rng((seed, block))
    x = centres(d, clusters, seed)[rng.integers(0, clusters, rows)]
    x += rng.standard_normal(size=(rows, d), dtype=np.float32)
    if dtype == np.uint8:
        return np.clip(np.rint(x * 8 + 128), 0, 255).astype(np.uint8)
    return x.astype(np.float16)


def layout(path, n, d):
    """The element type and the byte offset of row 0 in the file, which it creates at its full size."""
    if path.endswith(".npy"):
        header = {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float16)), "fortran_order": False,
                  "shape": (n, d)}
        with open(path, "wb") as f:
            np.lib.format.write_array_header_2_0(f, header)
            offset = f.tell()
            f.truncate(offset + n * d * 2)
        return np.float16, offset
    if path.endswith(".u8bin"):
        with open(path, "wb") as f:
            np.array([n, d], dtype="<u4").tofile(f)
            f.truncate(8 + n * d)
        return np.uint8, 8
    raise SystemExit(f"big_mixture.py: {path}: write .npy (float16) or .u8bin (uint8)")


def write_block(args):
    path, offset, block, n, d, clusters, seed, dtype = args
    values = block_values(block, n, d, clusters, seed, dtype)
    with open(path, "r+b") as f:
        f.seek(offset + block * BLOCK_ROWS * d * values.itemsize)
        f.write(values.tobytes())
    return block


def main():
    parser = arguments("big_mixture.py", __doc__)
    parser.add_argument("--workers", type=int, default=os.cpu_count())
    a = parser.parse_args()
    if a.n < 1 or a.d < 1 or (a.n >= 1 << 32 and a.out.endswith(".u8bin")):
        raise SystemExit("big_mixture.py: n and d must be at least 1 (and below 2^32 for .u8bin)")
    dtype, offset = layout(a.out, a.n, a.d)
    blocks = (a.n + BLOCK_ROWS - 1) // BLOCK_ROWS
    jobs = [(a.out, offset, b, a.n, a.d, a.clusters, a.seed, dtype) for b in range(blocks)]
    with multiprocessing.Pool(max(1, a.workers)) as pool:
        for _ in pool.imap_unordered(write_block, jobs):
            pass


if __name__ == "__main__":
    main()
