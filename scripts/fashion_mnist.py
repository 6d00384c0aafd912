"""Fashion-MNIST (Zalando, MIT licence) as vector files, read from Debian's dataset-fashion-mnist.

Each 28x28 image becomes one 784-d row of its raw pixel values 0..255, in the dataset's order, so
that the float32 files and the uint8 sample hold the same numbers. See data/README.md.
"""
import argparse
import gzip
import os
import sys

import numpy as np

# Debian's dataset-fashion-mnist; VLATTICE_FASHION_SOURCE points elsewhere (the GPU bundle carries the files).
SOURCE = os.environ.get("VLATTICE_FASHION_SOURCE", "/usr/share/datasets/fashion-mnist")
IDX_UBYTE_3D = 0x00000803  # IDX magic: unsigned bytes, three dimensions (n, rows, cols)
SIDE = 28
DEFAULT_OUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "data"))


def read_images(name):
    path = os.path.join(SOURCE, name)
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, n, rows, cols = (int(v) for v in np.frombuffer(raw, dtype=">u4", count=4))
    if magic != IDX_UBYTE_3D or (rows, cols) != (SIDE, SIDE):
        sys.exit(f"{path}: not an IDX file of {SIDE}x{SIDE} uint8 images "
                 f"(magic {magic:#010x}, {rows}x{cols})")
    expected = 16 + n * rows * cols
    if len(raw) != expected:
        sys.exit(f"{path}: {len(raw)} bytes after gunzip, expected {expected} for {n} images")
    return np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(n, rows * cols)


def replace(path, write):
    """Calls write(temporary_path), then renames, so an interrupted run leaves no half file."""
    temporary = f"{path}.tmp.{os.getpid()}"
    try:
        write(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)
    print(f"wrote {path}")


def write_fvecs(path, x):
    rows = np.empty(len(x), dtype=[("dim", "<i4"), ("values", "<f4", (x.shape[1],))])
    rows["dim"] = x.shape[1]
    rows["values"] = x
    replace(path, rows.tofile)


def write_npy(path, x, dtype="<f4"):
    def write(temporary):
        with open(temporary, "wb") as f:
            np.save(f, x.astype(dtype))
    replace(path, write)


def write_u8bin(path, x):
    def write(temporary):
        with open(temporary, "wb") as f:
            np.array(x.shape, dtype="<u4").tofile(f)
            x.astype(np.uint8).tofile(f)
    replace(path, write)


def main():
    parser = argparse.ArgumentParser(prog="scripts/fashion-mnist", description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default=DEFAULT_OUT,
                        help="folder for the train/test files (default: the repository's data/)")
    parser.add_argument("--sample", nargs=2, metavar=("N", "OUT.u8bin"),
                        help="write only the first N training images, as uint8 .u8bin")
    args = parser.parse_args()

    if not all(os.path.exists(os.path.join(SOURCE, name))
               for name in ("train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz")):
        print("install Debian's dataset-fashion-mnist (scripts/setup --bench does)", file=sys.stderr)
        return 1

    train = read_images("train-images-idx3-ubyte.gz")
    if args.sample:
        count, out = args.sample
        if not count.isdigit() or not 0 < int(count) <= len(train):
            parser.error(f"--sample N: expected 1..{len(train)}, got {count}")
        write_u8bin(out, train[:int(count)])
        return 0

    os.makedirs(args.out_dir, exist_ok=True)
    test = read_images("t10k-images-idx3-ubyte.gz")
    write_fvecs(os.path.join(args.out_dir, "fashion-mnist-train.fvecs"), train)
    write_npy(os.path.join(args.out_dir, "fashion-mnist-train.npy"), train)
    write_fvecs(os.path.join(args.out_dir, "fashion-mnist-test.fvecs"), test)
    return 0


if __name__ == "__main__":
    sys.exit(main())
