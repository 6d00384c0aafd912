"""FAISS on the same file as vlattice, for scripts/bench-cpu and scripts/quality. One JSON object per line.

  faiss_peer.py kmeans --input FILE --k K --iters N [--threads T]
      faiss.Kmeans for exactly N iterations: {"peer", "n", "d", "k", "iters", "threads", "seconds", "mse"}
      (seconds of the training alone; mse = mean squared distance of each vector to its nearest centroid)
  faiss_peer.py codecs --input FILE --budgets B,B,... [--families sq,pq,...] [--limit S] [--threads T]
      for each budget of code bytes per vector, each family's codec at no more code bytes, trained and
      filled with the whole set, then decoded: {"peer", "n", "d", "budget", "family", "codec", "status",
      "code_bytes", "total_bytes_per_vector", "mse", "recall10_at_10", "train_add_seconds",
      "train_add_cpu_seconds"} (wall and CPU seconds, all threads, of training and adding).

Codecs at a budget of B code bytes per vector, d dimensions (8-bit codebooks throughout):
  sq         SQ8 (d bytes) or SQ4 (d/2 bytes), the larger that fits; none below d/2
  pq         PQ M, M the largest divisor of d not over B (FAISS's PQ needs d % M == 0)
  opq        OPQ M_D,PQ M with M = B: a learned rotation to D = d rounded up to a multiple of M
  ivfpq      IVF nlist,PQ M by residual; its list id counts ceil(log2 nlist)/8 bytes per vector (as
             vlattice counts its anchor id), so M is the largest divisor of d not over B less that
  opq-ivfpq  OPQ M_D,IVF nlist,PQ M, M = floor(B - list id bytes), D as for opq
  rq, lsq    RQ Mx8, LSQ Mx8 (additive quantisers, M = B), FAISS's default training
The coarse quantiser of ivfpq is trained once (as IndexIVF trains it) and shared by its budgets; its
seconds are added to each. Every codec runs in its own process with --limit CPU seconds (all threads
together) of training and adding; RLIMIT_CPU ends it there, it is reported with status "over limit",
and the family's larger budgets, which cost more, are reported so without running. The limit is on
CPU time, not wall time, so that it cuts off the same codecs on a busy machine as on an idle one:
1,200 CPU seconds are 10 minutes of 2 threads on cores of their own. Code bytes are
FAISS's sa_code_size (plus the list id under IVF); total bytes per vector are the size of
faiss.serialize_index of the filled index over n (codebooks, coarse centroids, inverted lists with
their 64-bit ids). MSE is the mean over vectors of the squared L2 error of the reconstruction;
recall is 10-recall@10 of exhaustive float32 search over the reconstruction for the queries, against
the true neighbours.

Inputs: an HDF5 file in the ann-benchmarks layout (train, test, neighbors) with --queries Q taking
the first Q test rows; or a .npy/.fvecs file with --query-file and --truth (ids, one row per query,
.npy). kmeans also takes .npy and .fvecs alone. Needs Debian's python3-faiss with OpenBLAS
(scripts/setup --bench); run with /usr/bin/python3.
"""
import argparse
import json
import math
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

try:
    import faiss
except ImportError:
    sys.exit("faiss_peer: FAISS is missing; install Debian's python3-faiss (scripts/setup --bench does)")

FAMILIES = ["sq", "pq", "opq", "ivfpq", "opq-ivfpq", "rq", "lsq"]


def read_vectors(path):
    if path.endswith(".npy"):
        return np.load(path).astype(np.float32)
    if path.endswith(".fvecs"):
        words = np.fromfile(path, dtype=np.int32)
        d = int(words[0])
        return words.reshape(-1, d + 1)[:, 1:].view(np.float32).copy()
    sys.exit(f"faiss_peer: {path}: expected .npy, .fvecs, .h5 or .hdf5")


def read(path, queries=None, query_file=None, truth=None):
    """The vectors as float32, the queries (None without any) and their true neighbour ids (or None)."""
    if path.endswith((".h5", ".hdf5")):
        import h5py
        with h5py.File(path, "r") as f:
            x = f["train"][:].astype(np.float32)
            if queries is None or "test" not in f:
                return x, None, None
            q = f["test"][:queries].astype(np.float32)
            ids = f["neighbors"][:queries] if "neighbors" in f else None
            return x, q, ids
    x = read_vectors(path)
    if query_file is None:
        return x, None, None
    q = read_vectors(query_file)[:queries]
    ids = None if truth is None else np.load(truth)[:queries]
    return x, q, ids


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


def list_id_bytes(nlist):
    return math.ceil(math.log2(nlist)) / 8


def largest_divisor(d, most):
    return max((m for m in range(1, int(most) + 1) if d % m == 0), default=0)


def opq_prefix(m, d):
    padded = -(-d // m) * m
    return f"OPQ{m}_{padded}" if padded != d else f"OPQ{m}"


def spec(family, budget, d, nlist):
    """The index_factory string of a family at no more than budget code bytes, or None if none fits."""
    if family == "sq":
        return "SQ8" if d <= budget else "SQ4" if math.ceil(d / 2) <= budget else None
    if family == "pq":
        m = largest_divisor(d, budget)
        return f"PQ{m}" if m else None
    if family == "opq":
        return f"{opq_prefix(int(budget), d)},PQ{int(budget)}" if budget >= 1 else None
    if family == "ivfpq":
        m = largest_divisor(d, budget - list_id_bytes(nlist))
        return f"IVF{nlist},PQ{m}" if m else None
    if family == "opq-ivfpq":
        m = math.floor(budget - list_id_bytes(nlist))
        return f"{opq_prefix(m, d)},IVF{nlist},PQ{m}" if m >= 1 else None
    m = int(budget)
    return f"{family.upper()}{m}x8" if m >= 1 else None


def nearest10(base, queries):
    index = faiss.IndexFlatL2(base.shape[1])
    index.add(base)
    return index.search(queries, 10)[1]


def recall10(truth, found):
    return float(np.mean([len(set(truth[i][:10]) & set(found[i])) / 10 for i in range(len(found))]))


def squared_error(x, y, rows=8192):
    total = 0.0
    for start in range(0, len(x), rows):
        diff = x[start:start + rows].astype(np.float64) - y[start:start + rows]
        total += float(np.einsum("ij,ij->", diff, diff))
    return total / len(x)


def build(spec_text, d, coarse):
    index = faiss.index_factory(d, spec_text)
    if coarse is not None:
        # The shared coarse quantiser replaces the IVF's own; trained already, IVF training skips it.
        ivf = faiss.extract_index_ivf(index)
        quantizer = faiss.read_index(coarse)
        index.coarse_quantizer_keepalive = quantizer
        ivf.quantizer = quantizer
        ivf.own_fields = False
    inner = faiss.downcast_index(index.index if isinstance(index, faiss.IndexPreTransform) else index)
    if isinstance(inner, (faiss.IndexPQ, faiss.IndexIVFPQ)):
        inner.do_polysemous_training = False  # only for Hamming-distance search, which is not measured
    return index


def cpu_seconds():
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def one_codec(args):
    """Trains, fills and scores one codec; runs in its own process so that --limit can end it."""
    x, q, truth = read(args.input, args.queries, args.query_file, args.truth)
    n, d = x.shape
    index = build(args.spec, d, args.coarse)
    # SIGXCPU's default action ends the process even inside FAISS's C++ code.
    cpu_start = cpu_seconds()
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (math.ceil(cpu_start + args.limit), hard))
    start = time.perf_counter()
    index.train(x)
    index.add(x)
    seconds = time.perf_counter() - start
    cpu = cpu_seconds() - cpu_start
    resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        code_bytes = index.sa_code_size()
    else:
        code_bytes = ivf.code_size + list_id_bytes(ivf.nlist)
        ivf.make_direct_map()
    total = len(faiss.serialize_index(index))
    decoded = index.reconstruct_n(0, n)
    print(json.dumps({"code_bytes": code_bytes, "total_bytes_per_vector": total / n, "mse": squared_error(x, decoded),
                      "recall10_at_10": recall10(truth, nearest10(decoded, q)), "train_add_seconds": seconds,
                      "train_add_cpu_seconds": cpu}))


def train_coarse(args):
    """IndexIVF's own coarse training, written out for the IVF codecs to share."""
    x, _, _ = read(args.input)
    index = faiss.index_factory(x.shape[1], f"IVF{args.nlist},Flat")
    start, cpu_start = time.perf_counter(), cpu_seconds()
    index.train(x)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    faiss.write_index(faiss.extract_index_ivf(index).quantizer, args.coarse)
    print(json.dumps({"coarse_seconds": seconds, "coarse_cpu_seconds": cpu}))


def child(args, mode, extra, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), mode, "--input", args.input, "--threads", str(args.threads),
           "--queries", str(args.queries), "--limit", str(args.limit)]
    for name in ("query_file", "truth"):
        if getattr(args, name):
            cmd += ["--" + name.replace("_", "-"), getattr(args, name)]
    # Threads that spin while they wait take the time slices of the working ones on shared cores.
    env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
    try:
        done = subprocess.run(cmd + extra, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode == -signal.SIGXCPU:
        return None
    if done.returncode != 0:
        sys.exit(f"faiss_peer: {' '.join(cmd + extra)} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def codecs(args, n, d):
    budgets = [float(b) for b in args.budgets.split(",")]
    families = args.families.split(",")
    unknown = set(families) - set(FAMILIES)
    if unknown:
        sys.exit(f"faiss_peer: unknown --families {','.join(sorted(unknown))}; known: {','.join(FAMILIES)}")
    # Only catches a hang: on a busy machine the wall time runs far beyond the CPU time.
    timeout = 10 * args.limit + 3600
    with tempfile.TemporaryDirectory() as work:
        coarse, coarse_seconds = None, {}
        if "ivfpq" in families:
            coarse = os.path.join(work, "coarse.faissindex")
            done = child(args, "coarse", ["--nlist", str(args.nlist), "--coarse", coarse], timeout)
            coarse_seconds = done
        for family in families:
            over, done = None, {}
            for budget in sorted(budgets):
                text = spec(family, budget, d, args.nlist)
                row = {"peer": "faiss-codec", "faiss": faiss.__version__, "n": n, "d": d, "budget": budget,
                       "family": family, "codec": text, "limit_cpu_seconds": args.limit}
                if text is None:
                    row["status"] = "no fit"
                elif over is not None:
                    row["status"] = f"over limit (at {over:g} B already)"
                elif text in done:
                    # The largest codec that fits can be the same at two budgets; it is trained once.
                    row.update({k: v for k, v in done[text].items() if k not in row})
                else:
                    extra = ["--spec", text] + (["--coarse", coarse] if family == "ivfpq" else [])
                    result = child(args, "one", extra, timeout)
                    if result is None:
                        row["status"] = "over limit"
                        over = budget
                    else:
                        row.update(result, status="ok")
                        if family == "ivfpq":
                            row.update(coarse_seconds)
                            row["train_add_seconds"] += coarse_seconds["coarse_seconds"]
                            row["train_add_cpu_seconds"] += coarse_seconds["coarse_cpu_seconds"]
                        done[text] = row
                print(json.dumps(row), flush=True)


def main():
    parser = argparse.ArgumentParser(prog="faiss_peer.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["kmeans", "codecs", "one", "coarse"],
                        help="one and coarse are codecs' own steps, each in a process of its own")
    parser.add_argument("--input", required=True)
    parser.add_argument("--k", type=int, default=256, help="kmeans: centroids (default 256)")
    parser.add_argument("--iters", type=int, default=20, help="kmeans: iterations (default 20)")
    parser.add_argument("--threads", type=int, default=0, help="OpenMP threads (default: FAISS's own choice)")
    parser.add_argument("--budgets", default="32,49,98,196,392,784",
                        help="codecs: code bytes per vector, comma-separated (default 32,49,98,196,392,784)")
    parser.add_argument("--families", default=",".join(FAMILIES),
                        help=f"codecs: which, comma-separated (default {','.join(FAMILIES)})")
    parser.add_argument("--nlist", type=int, default=1024, help="codecs: IVF lists (default 1024)")
    parser.add_argument("--limit", type=int, default=1200,
                        help="codecs: CPU seconds (all threads) of training and adding allowed per codec "
                             "(default 1200)")
    parser.add_argument("--queries", type=int, default=1000, help="codecs: queries for the recall (default 1000)")
    parser.add_argument("--query-file", help="codecs: the queries of a .npy/.fvecs --input")
    parser.add_argument("--truth", help="codecs: .npy of the true neighbour ids of --query-file, one row per query")
    parser.add_argument("--spec", help=argparse.SUPPRESS)
    parser.add_argument("--coarse", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.threads:
        faiss.omp_set_num_threads(args.threads)
    if args.mode == "one":
        return one_codec(args)
    if args.mode == "coarse":
        return train_coarse(args)
    if args.mode == "kmeans":
        x = read(args.input)[0]
        print(json.dumps(kmeans(x, args.k, args.iters)), flush=True)
        return None
    x, q, truth = read(args.input, args.queries, args.query_file, args.truth)
    if q is None or truth is None:
        sys.exit("faiss_peer: codecs needs queries and their true neighbours: an HDF5 --input with test and "
                 "neighbors, or --query-file and --truth")
    return codecs(args, *x.shape)


if __name__ == "__main__":
    main()
