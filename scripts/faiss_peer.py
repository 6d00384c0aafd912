"""FAISS on the same file as vlattice, for scripts/bench-cpu and scripts/quality. One JSON object per line.

  faiss_peer.py kmeans --input FILE --k K --iters N [--threads T]
      faiss.Kmeans for exactly N iterations: {"peer", "n", "d", "k", "iters", "threads", "seconds", "mse"}
      (seconds of the training alone; mse = mean squared distance of each vector to its nearest centroid)
  faiss_peer.py codecs --input FILE [--spec FACTORY ...] [--queries Q]
      each codec trained and filled with the whole set, then decoded: {"peer", "codec", "bytes_per_vector",
      "ratio_vs_f32", "mse", "recall10_at_10", "train_add_seconds"}; recall is of exhaustive float32 search
      over the decoded vectors for the first Q queries (the file's `test`, else its first rows), against
      exhaustive search over the originals. Without --spec: SQ8, SQ4, PQ d/4, d/8, d/16 (when 16 divides
      d), IVF1024,SQ8, IVF1024,SQ4 and IVF1024,PQ d/8.

Inputs: .npy, .fvecs, or .h5/.hdf5 in the ann-benchmarks layout (train, and test for the queries).
Needs Debian's python3-faiss with OpenBLAS (scripts/setup --bench); run with /usr/bin/python3.
"""
import argparse
import json
import math
import sys
import time

import numpy as np

try:
    import faiss
except ImportError:
    sys.exit("faiss_peer: FAISS is missing; install Debian's python3-faiss (scripts/setup --bench does)")


def read(path):
    """The vectors as float32, and the queries an HDF5 file holds (None otherwise)."""
    if path.endswith(".npy"):
        return np.load(path).astype(np.float32), None
    if path.endswith(".fvecs"):
        words = np.fromfile(path, dtype=np.int32)
        d = int(words[0])
        return words.reshape(-1, d + 1)[:, 1:].view(np.float32).copy(), None
    if path.endswith((".h5", ".hdf5")):
        import h5py
        with h5py.File(path, "r") as f:
            queries = f["test"][:].astype(np.float32) if "test" in f else None
            return f["train"][:].astype(np.float32), queries
    sys.exit(f"faiss_peer: {path}: expected .npy, .fvecs, .h5 or .hdf5")


def kmeans(x, k, iters):
    # max_points_per_centroid: FAISS would otherwise train on a sample, vlattice fits every point.
    km = faiss.Kmeans(x.shape[1], k, niter=iters, seed=1, max_points_per_centroid=len(x))
    start = time.perf_counter()
    km.train(x)
    seconds = time.perf_counter() - start
    squared, _ = km.index.search(x, 1)
    return {"peer": "faiss-kmeans-cpu", "n": len(x), "d": x.shape[1], "k": k, "iters": iters,
            "threads": faiss.omp_get_max_threads(), "seconds": round(seconds, 3),
            "mse": float(squared.astype(np.float64).mean())}


def default_specs(d):
    specs = ["SQ8", "SQ4"]
    if d % 16 == 0:
        specs += [f"PQ{d // 4}", f"PQ{d // 8}", f"PQ{d // 16}"]
    specs += ["IVF1024,SQ8", "IVF1024,SQ4"]
    if d % 16 == 0:
        specs.append(f"IVF1024,PQ{d // 8}")
    return specs


def nearest10(base, queries):
    index = faiss.IndexFlatL2(base.shape[1])
    index.add(base)
    return index.search(queries, 10)[1]


def codec(x, spec, truth, queries):
    n, d = x.shape
    index = faiss.index_factory(d, spec)
    if isinstance(index, faiss.IndexPQ):
        index.do_polysemous_training = False  # only for Hamming-distance search, which is not measured
    start = time.perf_counter()
    index.train(x)
    index.add(x)
    seconds = time.perf_counter() - start
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        code_bytes = index.sa_code_size()
    else:
        # A vector's code under IVF is its residual code plus the id of its list.
        ivf.make_direct_map()
        code_bytes = ivf.code_size + math.ceil(math.log2(ivf.nlist) / 8)
    decoded = index.reconstruct_n(0, n)
    found = nearest10(decoded, queries)
    recall = np.mean([len(set(truth[i]) & set(found[i])) / 10 for i in range(len(queries))])
    return {"peer": "faiss-codec", "codec": spec, "bytes_per_vector": code_bytes,
            "ratio_vs_f32": round(code_bytes / (4 * d), 5),
            "mse": float(((x.astype(np.float64) - decoded) ** 2).sum(1).mean()),
            "recall10_at_10": float(recall), "train_add_seconds": round(seconds, 2)}


def main():
    parser = argparse.ArgumentParser(prog="faiss_peer.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["kmeans", "codecs"])
    parser.add_argument("--input", required=True)
    parser.add_argument("--k", type=int, default=256, help="kmeans: centroids (default 256)")
    parser.add_argument("--iters", type=int, default=20, help="kmeans: iterations (default 20)")
    parser.add_argument("--threads", type=int, default=0, help="OpenMP threads (default: FAISS's own choice)")
    parser.add_argument("--spec", action="append", help="codecs: a faiss.index_factory string (repeatable)")
    parser.add_argument("--queries", type=int, default=1000, help="codecs: queries for the recall (default 1000)")
    args = parser.parse_args()
    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    x, queries = read(args.input)
    if args.mode == "kmeans":
        print(json.dumps(kmeans(x, args.k, args.iters)), flush=True)
        return
    queries = (x if queries is None else queries)[:args.queries]
    truth = nearest10(x, queries)
    for spec in args.spec or default_specs(x.shape[1]):
        print(json.dumps(codec(x, spec, truth, queries)), flush=True)


if __name__ == "__main__":
    main()
