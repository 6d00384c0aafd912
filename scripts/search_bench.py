"""scripts/search-bench: search speed against recall at the same code bytes, vlattice beside FAISS.

For each budget B (code bytes per vector) on one file in the ann-benchmarks layout (train, test,
neighbors):

  vlattice      `compress --target-bytes B -m ANCHORS --codec pq` of the train set (or the file
                vlattice-<B>B.vlat of --vlat-dir when it is there), then `vlattice query --k 10
                --nprobe N` of the first --limit test queries for each --nprobe (`all`: exhaustive),
                on the CPU. Files of product codes are searched by asymmetric distance over the
                members of the nprobe nearest anchors.
  FAISS IVF-PQ  IndexIVFPQ (nlist --nlist, 8-bit codes, by residual) trained and filled with the
                train set, searched for each --faiss-nprobe. Its code bytes are the PQ code (M bytes)
                plus the list id, ceil(log2 nlist)/8 bytes, as scripts/quality counts them; two sizes
                at no more than B: `divisor`, M the largest divisor of d not over B - list id bytes
                (as scripts/faiss_peer.py fits IVF-PQ), and `padded`, M = floor(B - list id bytes)
                over the vectors padded with zeros to a multiple of M dimensions (which leaves
                every L2 distance as it is). The coarse quantiser is trained once (as IndexIVF
                trains it) and shared by every budget (and kept in --vlat-dir when given).
  FAISS Flat    IndexFlatL2 over vlattice's decoded copy (`vlattice decompress`): exhaustive
                float32 search of the same reconstruction, beside vlattice's `--nprobe all`.

Every search is of all the queries at once and is timed --repeat times; the best time counts.
queries/s is the number of queries over that time: for FAISS the wall time of index.search; for
vlattice the seconds `vlattice query --json` reports for its search, which leave out reading the
file and the queries but take in grouping the codes by anchor, done on each run (the `1 query`
line of the output estimates that fixed part: one query at nprobe 1). Recall is 10-recall@10
against the file's true neighbours, computed here from the ids either tool returns, the same way
for both (vlattice's own figure is kept in the JSON).

The summary takes each vlattice row's recall and finds, for each FAISS IVF-PQ size, the smallest
--faiss-nprobe reaching at least that recall: its queries/s, and its ratio to vlattice's. Both tools
get --threads threads (faiss.omp_set_num_threads; vlattice --threads) and OpenMP's passive wait
policy unless OMP_WAIT_POLICY says otherwise (scripts/search-bench sets it before Python starts).
The load average is recorded at the start and end of the run: on a busy machine queries/s falls
for both. Writes search.md (the tables, also printed) and search.json to --out. The vlattice
binary is $VLATTICE_BIN, else build/vlattice, else build-cpu/vlattice. Needs python3-faiss and
python3-h5py (scripts/setup --bench); run with /usr/bin/python3.
"""
import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time

try:
    import faiss
    import h5py
    import numpy as np
except ImportError as missing:
    sys.exit(f"search-bench: Python module '{missing.name}' is missing; install python3-faiss, python3-h5py "
             "and python3-numpy (scripts/setup --bench does)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import faiss_peer  # noqa: E402
from harness import ENV, fmt, run, share_blas_kernels  # noqa: E402

DEFAULT_DATA = os.path.join(ROOT, "data/fashion-mnist-784-euclidean.hdf5")


def cpu_seconds():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def uptime():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average: %.2f, %.2f, %.2f" % os.getloadavg()


def log(text):
    print(f"search-bench: {text}", file=sys.stderr, flush=True)


def load(path, limit):
    with h5py.File(path, "r") as f:
        for name in ("train", "test", "neighbors"):
            if name not in f:
                sys.exit(f"search-bench: {path} has no dataset '{name}' (the ann-benchmarks layout has train, "
                         "test and neighbors)")
        x = f["train"][:].astype(np.float32)
        q = f["test"][:limit].astype(np.float32)
        truth = f["neighbors"][:limit, :10]
    if len(truth[0]) < 10:
        sys.exit(f"search-bench: {path}: 10-recall@10 needs 10 true neighbours per query")
    return x, q, truth


def best_of(repeat, fn):
    """The result of the fastest of repeat calls of fn, and its seconds."""
    best, result = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
        if seconds < best:
            best, result = seconds, out
    return result, best


# vlattice -------------------------------------------------------------------------------------------

def vlattice_file(a, vlattice, budget, n, d):
    """The .vlat of a budget: --vlat-dir's when there, else compressed (into --vlat-dir or --out)."""
    folder = a.vlat_dir or a.out
    path = os.path.join(folder, f"vlattice-{budget}B.vlat")
    made = None
    if os.path.exists(path):
        log(f"vlattice {budget} B: reusing {path}")
    else:
        os.makedirs(folder, exist_ok=True)
        cmd = [vlattice, "compress", a.data, "-o", path, "--target-bytes", str(budget), "-m", str(a.anchors),
               "--codec", "pq", "--threads", str(a.threads), "--device", "cpu", "--quiet"]
        log(f"vlattice {budget} B: {' '.join(cmd)}")
        start, cpu_start = time.perf_counter(), cpu_seconds()
        run("search-bench", cmd)
        made = {"command": cmd, "wall_seconds": time.perf_counter() - start, "cpu_seconds": cpu_seconds() - cpu_start}
    info = json.loads(run("search-bench", [vlattice, "info", "--json", path]))
    meta = info.get("metadata", {})
    target = meta.get("residuals", {}).get("target_bytes")
    wrong = []
    if info.get("codec") != "product":
        wrong.append(f"codec {info.get('codec')}, not product")
    if (info["n"], info["d"]) != (n, d):
        wrong.append(f"{info['n']} x {info['d']} vectors, not {n} x {d}")
    if target is not None and float(target) != float(budget):
        wrong.append(f"made for {target:g} bytes, not {budget}")
    if info["code_bytes_per_vector"] > budget:
        wrong.append(f"{info['code_bytes_per_vector']:g} code bytes, over {budget}")
    if wrong:
        sys.exit(f"search-bench: {path}: " + "; ".join(wrong) + " (move it away to have it made again)")
    return path, info, made


def vlattice_query(a, vlattice, path, nprobe, limit):
    cmd = [vlattice, "query", path, "--queries", a.data, "--limit", str(limit), "--k", "10", "--nprobe", nprobe,
           "--ground-truth", a.data, "--threads", str(a.threads), "--device", "cpu", "--json"]
    runs = []
    for _ in range(a.repeat):
        start = time.perf_counter()
        found = json.loads(run("search-bench", cmd))
        found["process_seconds"] = time.perf_counter() - start
        runs.append(found)
    return min(runs, key=lambda r: r["seconds"]), runs, cmd


def vlattice_rows(a, vlattice, budget, x, q, truth):
    path, info, made = vlattice_file(a, vlattice, budget, *x.shape)
    code = info["product"]["description"] if "product" in info else info.get("residual_widths", "")
    rows = []
    for nprobe in a.nprobe.split(","):
        best, runs, cmd = vlattice_query(a, vlattice, path, nprobe, len(q))
        ids = np.array([[-1 if i is None else i for i in row] for row in best["ids"]])
        recall = faiss_peer.recall10(truth, ids)
        rows.append({"tool": "vlattice", "index": f"pq, m = {info['m']}, {code}",
                     "code_bytes": info["code_bytes_per_vector"], "nprobe": best["nprobe"],
                     "nprobe_given": nprobe, "recall10_at_10": recall,
                     "vlattice_recall10_at_10": best["recall"]["10-recall@10"],
                     "queries_per_second": len(q) / best["seconds"], "seconds": best["seconds"],
                     "all_seconds": [r["seconds"] for r in runs],
                     "process_seconds": [r["process_seconds"] for r in runs],
                     "visited_per_query": best["visited_per_query"], "command": cmd})
        log(f"vlattice {budget} B nprobe {nprobe}: recall {recall:.4f}, {rows[-1]['queries_per_second']:.0f} q/s")
    one, _, _ = vlattice_query(a, vlattice, path, "1", 1)
    fixed = {"seconds": one["seconds"], "note": "one query at nprobe 1, best of --repeat: the per-run part "
                                                "of vlattice's reported search seconds"}
    for r in rows:
        rest = r["seconds"] - fixed["seconds"]
        r["queries_per_second_less_one"] = (len(q) - 1) / rest if len(q) > 1 and rest > 0 else None
    with tempfile.TemporaryDirectory() as work:
        decoded_path = os.path.join(work, "decoded.npy")
        run("search-bench", [vlattice, "decompress", path, "-o", decoded_path, "--device", "cpu", "--quiet"])
        decoded = np.load(decoded_path)
    flat = faiss.IndexFlatL2(decoded.shape[1])
    flat.add(decoded)
    del decoded
    (_, ids), seconds = best_of(a.repeat, lambda: flat.search(q, 10))
    rows.append({"tool": "FAISS", "index": "Flat over vlattice's decoded copy", "code_bytes": None,
                 "nprobe": "all", "recall10_at_10": faiss_peer.recall10(truth, ids),
                 "queries_per_second": len(q) / seconds, "seconds": seconds})
    log(f"FAISS Flat over vlattice {budget} B: recall {rows[-1]['recall10_at_10']:.4f}, "
        f"{rows[-1]['queries_per_second']:.0f} q/s")
    if not a.vlat_dir and not a.keep:
        os.remove(path)
    return rows, {"file": path, "code": code, "m": info["m"], "code_bytes": info["code_bytes_per_vector"],
                  "file_bytes_per_vector": info["total_bytes"] / info["n"], "compress": made,
                  "reused": made is None, "one_query": fixed}


# FAISS IVF-PQ ---------------------------------------------------------------------------------------

def train_coarse(a, x):
    """IndexIVF's own coarse training; its centroids are shared by every IVF-PQ index. With --vlat-dir they
    are kept there, beside the .vlat files of the same data, and used again."""
    nlist = a.nlist
    kept = a.vlat_dir and os.path.join(a.vlat_dir, f"faiss-IVF{nlist}-{os.path.basename(a.data)}.npy")
    if kept and os.path.exists(kept):
        centroids = np.load(kept)
        if centroids.shape == (nlist, x.shape[1]):
            log(f"FAISS: reusing the coarse centroids {kept}")
            return centroids, {"reused": kept}
    log(f"FAISS: training the IVF{nlist} coarse quantiser")
    index = faiss.index_factory(x.shape[1], f"IVF{nlist},Flat")
    start, cpu_start = time.perf_counter(), cpu_seconds()
    index.train(x)
    centroids = faiss.extract_index_ivf(index).quantizer.reconstruct_n(0, nlist)
    if kept:
        os.makedirs(a.vlat_dir, exist_ok=True)
        np.save(kept, centroids)
    return centroids, {"wall_seconds": time.perf_counter() - start, "cpu_seconds": cpu_seconds() - cpu_start}


def pad(v, width):
    return v if v.shape[1] == width else np.hstack([v, np.zeros((len(v), width - v.shape[1]), np.float32)])


def ivfpq_sizes(budget, d, nlist, which):
    """(name, M, padded d) of each IVF-PQ size at no more than budget code bytes."""
    room = budget - faiss_peer.list_id_bytes(nlist)
    out = []
    if "divisor" in which:
        m = faiss_peer.largest_divisor(d, room)
        if m:
            out.append(("divisor", m, d))
    if "padded" in which:
        m = math.floor(room)
        if m >= 1 and all(m != o[1] for o in out):
            out.append(("padded", m, -(-d // m) * m))
    return out


def faiss_rows(a, budget, x, q, truth, centroids):
    rows, built = [], []
    d = x.shape[1]
    for size, m, width in ivfpq_sizes(budget, d, a.nlist, a.faiss_m):
        quantizer = faiss.IndexFlatL2(width)
        quantizer.add(pad(centroids, width))
        index = faiss.IndexIVFPQ(quantizer, width, a.nlist, m, 8)
        index.do_polysemous_training = False  # only for Hamming-distance search, which is not measured
        xp = pad(x, width)
        start, cpu_start = time.perf_counter(), cpu_seconds()
        index.train(xp)  # the quantiser is trained already: only the PQ is
        index.add(xp)
        train_add = {"wall_seconds": time.perf_counter() - start, "cpu_seconds": cpu_seconds() - cpu_start}
        del xp
        # sa_code_size would count FAISS's own 2-byte list id; the list id is counted as vlattice counts its anchor id.
        code_bytes = index.code_size + faiss_peer.list_id_bytes(a.nlist)
        if code_bytes > budget:
            sys.exit(f"search-bench: IVF{a.nlist},PQ{m} has {code_bytes:g} code bytes, over {budget}")
        name = f"IVF{a.nlist},PQ{m}" + (f" (d padded to {width})" if width != d else "")
        built.append({"size": size, "index": name, "m": m, "padded_d": width, "code_bytes": code_bytes,
                      "train_add": train_add})
        qp = pad(q, width)
        for nprobe in (int(p) for p in a.faiss_nprobe.split(",")):
            index.nprobe = nprobe
            (_, ids), seconds = best_of(a.repeat, lambda: index.search(qp, 10))
            rows.append({"tool": "FAISS", "index": name, "size": size, "code_bytes": code_bytes,
                         "nprobe": nprobe, "recall10_at_10": faiss_peer.recall10(truth, ids),
                         "queries_per_second": len(q) / seconds, "seconds": seconds})
            log(f"FAISS {name} nprobe {nprobe}: recall {rows[-1]['recall10_at_10']:.4f}, "
                f"{rows[-1]['queries_per_second']:.0f} q/s")
    return rows, built


# Output ---------------------------------------------------------------------------------------------

def summary(rows):
    """For each vlattice row, each IVF-PQ size's smallest nprobe reaching its recall."""
    out = []
    ours = [r for r in rows if r["tool"] == "vlattice"]
    sizes = []
    for r in rows:
        if r.get("size") and r["index"] not in sizes:
            sizes.append(r["index"])
    for v in ours:
        for name in sizes:
            reach = [r for r in rows if r["index"] == name and r["recall10_at_10"] >= v["recall10_at_10"]]
            hit = min(reach, key=lambda r: r["nprobe"], default=None)
            best = max((r for r in rows if r["index"] == name), key=lambda r: r["recall10_at_10"])
            out.append({"vlattice_nprobe": v["nprobe_given"], "vlattice_recall": v["recall10_at_10"],
                        "vlattice_qps": v["queries_per_second"], "faiss": name,
                        "faiss_nprobe": hit and hit["nprobe"], "faiss_recall": hit and hit["recall10_at_10"],
                        "faiss_qps": hit and hit["queries_per_second"],
                        "ratio": hit and hit["queries_per_second"] / v["queries_per_second"],
                        "faiss_best_recall": best["recall10_at_10"], "faiss_best_nprobe": best["nprobe"]})
    return out


def tables(a, name, n, d, nq, loads, budgets):
    lines = [f"{name}: {n} x {d}, {nq} queries, k = 10, {a.threads} threads, best of {a.repeat}; "
             f"OMP_WAIT_POLICY={ENV['OMP_WAIT_POLICY']}", "",
             f"load at start: {loads[0]}", f"load at end:   {loads[1]}", ""]
    for b in budgets:
        v = b["vlattice"]
        lines += [f"### {b['budget']} code bytes per vector", "",
                  f"vlattice: {v['code']}, m = {v['m']}, {v['code_bytes']:g} code B "
                  f"({v['file_bytes_per_vector']:.1f} B per vector with anchors and codebooks); "
                  + ("file reused" if v["reused"] else
                     f"compressed in {v['compress']['wall_seconds']:.0f} s ({v['compress']['cpu_seconds']:.0f} CPU s)")
                  + f"; 1 query at nprobe 1: {v['one_query']['seconds'] * 1000:.0f} ms of its reported search time.",
                  "FAISS IVF-PQ: " + "; ".join(f"{f['index']}, {f['code_bytes']:g} code B, trained and added in "
                                               f"{f['train_add']['wall_seconds']:.0f} s" for f in b["faiss"]), "",
                  "| tool | index | code B | nprobe | 10-recall@10 | queries/s | queries/s less 1 query's time |",
                  "|---|---|---|---|---|---|---|"]
        for r in b["rows"]:
            lines.append(f"| {r['tool']} | {r['index']} | {fmt(r['code_bytes'], 'g')} | {r['nprobe']} | "
                         f"{r['recall10_at_10']:.4f} | {r['queries_per_second']:.0f} | "
                         f"{fmt(r.get('queries_per_second_less_one'), '.0f')} |")
        lines += ["", "At vlattice's recall, FAISS IVF-PQ's smallest nprobe reaching it:", "",
                  "| vlattice nprobe | recall | queries/s | FAISS | nprobe | recall | queries/s | FAISS / vlattice |",
                  "|---|---|---|---|---|---|---|---|"]
        for s in b["summary"]:
            if s["faiss_nprobe"] is None:
                tail = (f"not reached (best {s['faiss_best_recall']:.4f} at nprobe {s['faiss_best_nprobe']}) | | | |")
            else:
                tail = f"{s['faiss_nprobe']} | {s['faiss_recall']:.4f} | {s['faiss_qps']:.0f} | {s['ratio']:.2f} |"
            lines.append(f"| {s['vlattice_nprobe']} | {s['vlattice_recall']:.4f} | {s['vlattice_qps']:.0f} | "
                         f"{s['faiss']} | {tail}")
        flat = next(r for r in b["rows"] if r["index"].startswith("Flat"))
        every = next((r for r in b["rows"] if r["tool"] == "vlattice" and r["nprobe_given"] == "all"), None)
        if every:
            lines += ["", f"Exhaustive over the same codes: vlattice --nprobe all {every['recall10_at_10']:.4f} at "
                          f"{every['queries_per_second']:.0f} queries/s; FAISS Flat over the decoded copy "
                          f"{flat['recall10_at_10']:.4f} at {flat['queries_per_second']:.0f} queries/s "
                          f"(FAISS / vlattice {flat['queries_per_second'] / every['queries_per_second']:.2f})."]
        lines.append("")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(prog="scripts/search-bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help=f"HDF5 in the ann-benchmarks layout (default: {DEFAULT_DATA})")
    ap.add_argument("--limit", type=int, default=1000, help="queries used, the first test rows (default 1000)")
    ap.add_argument("--budgets", default="32,98", help="code bytes per vector, comma-separated (default 32,98)")
    ap.add_argument("--anchors", type=int, default=1024, help="vlattice -m (default 1024)")
    ap.add_argument("--nprobe", default="1,2,4,8,16,32,64,all",
                    help="vlattice's --nprobe values (default 1,2,4,8,16,32,64,all)")
    ap.add_argument("--faiss-nprobe", default="1,2,4,8,16,32,64",
                    help="FAISS IVF-PQ's nprobe values (default 1,2,4,8,16,32,64)")
    ap.add_argument("--nlist", type=int, default=1024, help="FAISS IVF lists (default 1024)")
    ap.add_argument("--faiss-m", default="divisor,padded",
                    help="FAISS IVF-PQ sizes: divisor (M divides d), padded (M = floor(B - list id bytes), "
                         "zero-padded dimensions), or both (default divisor,padded)")
    ap.add_argument("--threads", type=int, default=2, help="threads of both tools (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="timings of each search; the best counts (default 3)")
    ap.add_argument("--vlat-dir", help="folder of vlattice-<B>B.vlat files (and FAISS's coarse centroids): used when "
                                       "there, else written there and kept (default: made in --out and removed)")
    ap.add_argument("--keep", action="store_true", help="keep the .vlat files made in --out")
    ap.add_argument("--out", default="search-out", help="output folder (default search-out)")
    a = ap.parse_args()

    if not set(a.faiss_m.split(",")) <= {"divisor", "padded"}:
        ap.error("--faiss-m takes divisor, padded or both")
    if a.repeat < 1 or a.limit < 1 or a.threads < 1:
        ap.error("--repeat, --limit and --threads are at least 1")
    vlattice = os.environ.get("VLATTICE_BIN") or next(
        (p for p in (os.path.join(ROOT, "build/vlattice"), os.path.join(ROOT, "build-cpu/vlattice"))
         if os.access(p, os.X_OK)), None)
    if not vlattice or not os.access(vlattice, os.X_OK):
        sys.exit("search-bench: no vlattice binary in build/ or build-cpu/; build it (scripts/setup) or set VLATTICE_BIN")
    share_blas_kernels(vlattice)
    if not a.data:
        a.data = DEFAULT_DATA
        if not os.path.exists(a.data):
            run("search-bench", [os.path.join(ROOT, "scripts/ann-hdf5"), "fashion-mnist", a.data])
    if not os.path.isfile(a.data):
        sys.exit(f"search-bench: {a.data}: no such file")
    os.makedirs(a.out, exist_ok=True)
    faiss.omp_set_num_threads(a.threads)

    start_load, cpu_start, wall_start = uptime(), cpu_seconds(), time.perf_counter()
    log(start_load)
    x, q, truth = load(a.data, a.limit)
    n, d = x.shape
    budgets = sorted({int(b) for b in a.budgets.split(",")})
    centroids, coarse = train_coarse(a, x)
    results = []
    for budget in budgets:
        ours, info = vlattice_rows(a, vlattice, budget, x, q, truth)
        peers, built = faiss_rows(a, budget, x, q, truth, centroids)
        rows = ours + peers
        results.append({"budget": budget, "vlattice": info, "faiss": built, "rows": rows, "summary": summary(rows)})
    loads = (start_load, uptime())

    name = os.path.basename(a.data)
    text = tables(a, name, n, d, len(q), loads, results)
    print("\n" + text)
    with open(os.path.join(a.out, "search.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "search.json"), "w") as f:
        json.dump({"data": a.data, "n": n, "d": d, "queries": len(q), "k": 10, "threads": a.threads,
                   "repeat": a.repeat, "anchors": a.anchors, "nlist": a.nlist, "faiss": faiss.__version__,
                   "omp_wait_policy": ENV["OMP_WAIT_POLICY"], "vlattice_bin": vlattice, "uptime_start": loads[0],
                   "uptime_end": loads[1], "coarse_training": coarse, "wall_seconds": time.perf_counter() - wall_start,
                   "cpu_seconds": cpu_seconds() - cpu_start, "budgets": results}, f, indent=2)
    log(f"wrote {a.out}/search.md and search.json; {time.perf_counter() - wall_start:.0f} s, "
        f"{cpu_seconds() - cpu_start:.0f} CPU s")


if __name__ == "__main__":
    main()
