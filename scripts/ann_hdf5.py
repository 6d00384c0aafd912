"""Vector sets in the ann-benchmarks HDF5 layout: datasets train (n x d float32), test (q x d
float32), neighbors (q x k int32: the exact k nearest train rows of each test row, nearest first,
ties to the lower index) and distances (q x k float32, Euclidean), and the file attribute
distance = 'euclidean'.

  fashion-mnist [OUT]            Debian's dataset-fashion-mnist: 60,000 train, 10,000 test images
  synthetic N D OUT [options]    a Gaussian mixture of N train rows of dimension D
  npy IN.npy OUT [--queries Q]   the rows of IN.npy, its last Q held out as test (so that a file in a
                                 random order, such as scripts/embeddings writes, gives random queries)
"""
import argparse
import os
import sys

import h5py
import numpy as np

import fashion_mnist
from mixture import gaussian_mixture

DEFAULT_FASHION = os.path.join(fashion_mnist.DEFAULT_OUT, "fashion-mnist-784-euclidean.hdf5")


def exact_neighbors(train, test, k, block=256):
    """The k nearest train rows of each test row by squared Euclidean distance computed in float64,
    in blocks of test rows so that memory stays at block x n distances."""
    k = min(k, len(train))
    train64 = train.astype(np.float64)
    train_norms = np.einsum("ij,ij->i", train64, train64)
    neighbors = np.empty((len(test), k), dtype=np.int32)
    distances = np.empty((len(test), k), dtype=np.float32)
    for start in range(0, len(test), block):
        queries = test[start:start + block].astype(np.float64)
        squared = (np.einsum("ij,ij->i", queries, queries)[:, None] + train_norms[None, :]
                   - 2.0 * queries @ train64.T)
        np.maximum(squared, 0.0, out=squared)
        # A stable sort by distance keeps equal distances in index order.
        order = np.argsort(squared, axis=1, kind="stable")[:, :k]
        neighbors[start:start + block] = order
        distances[start:start + block] = np.sqrt(np.take_along_axis(squared, order, axis=1))
        print(f"\rneighbours: {min(start + block, len(test))} of {len(test)} queries", end="", file=sys.stderr)
    print(file=sys.stderr)
    return neighbors, distances


def write_ann_hdf5(path, train, test, k):
    neighbors, distances = exact_neighbors(train, test, k)

    def write(temporary):
        with h5py.File(temporary, "w") as f:
            f.create_dataset("train", data=train.astype("<f4"))
            f.create_dataset("test", data=test.astype("<f4"))
            f.create_dataset("neighbors", data=neighbors)
            f.create_dataset("distances", data=distances)
            f.attrs["distance"] = "euclidean"
            f.attrs["point_type"] = "float"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fashion_mnist.replace(path, write)


def positive(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def main():
    parser = argparse.ArgumentParser(prog="scripts/ann-hdf5", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    fashion = commands.add_parser("fashion-mnist", help="Fashion-MNIST, 60,000 train and 10,000 test images")
    fashion.add_argument("out", nargs="?", default=DEFAULT_FASHION, help=f"default: {DEFAULT_FASHION}")
    fashion.add_argument("--k", type=positive, default=100, help="neighbours per test row (default 100)")
    synthetic = commands.add_parser("synthetic", help="a Gaussian mixture of N x D")
    synthetic.add_argument("n", type=positive)
    synthetic.add_argument("d", type=positive)
    synthetic.add_argument("out")
    synthetic.add_argument("--queries", type=positive, default=1000, help="test rows, drawn like the train rows (default 1000)")
    synthetic.add_argument("--clusters", type=positive, default=1000, help="mixture components (default 1000)")
    synthetic.add_argument("--seed", type=int, default=0)
    synthetic.add_argument("--k", type=positive, default=100, help="neighbours per test row (default 100)")
    held_out = commands.add_parser("npy", help="a .npy file's rows, its last Q as test")
    held_out.add_argument("input", help="n x d .npy (converted to float32)")
    held_out.add_argument("out")
    held_out.add_argument("--queries", type=positive, default=1000, help="rows held out as test (default 1000)")
    held_out.add_argument("--k", type=positive, default=100, help="neighbours per test row (default 100)")
    args = parser.parse_args()

    if args.command == "fashion-mnist":
        if not all(os.path.exists(os.path.join(fashion_mnist.SOURCE, name))
                   for name in ("train-images-idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz")):
            print("install Debian's dataset-fashion-mnist (scripts/setup --bench does)", file=sys.stderr)
            return 1
        train = fashion_mnist.read_images("train-images-idx3-ubyte.gz")
        test = fashion_mnist.read_images("t10k-images-idx3-ubyte.gz")
        write_ann_hdf5(args.out, train, test, args.k)
    elif args.command == "npy":
        both = np.load(args.input).astype(np.float32)
        if both.ndim != 2 or len(both) <= args.queries:
            print(f"{args.input}: {both.shape} holds no n x d set with more than {args.queries} rows", file=sys.stderr)
            return 1
        write_ann_hdf5(args.out, both[:-args.queries], both[-args.queries:], args.k)
    else:
        both = gaussian_mixture(args.n + args.queries, args.d, args.clusters, args.seed)
        write_ann_hdf5(args.out, both[:args.n], both[args.n:], args.k)
    return 0


if __name__ == "__main__":
    sys.exit(main())
