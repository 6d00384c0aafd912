"""scripts/quality: vlattice against FAISS's codecs at the same code bytes per vector, on the same file.

For each budget B (code bytes per vector) vlattice compresses the base vectors (`compress
--target-bytes B`, with --codec only when --vlattice-codec is given) and scripts/faiss_peer.py trains
FAISS's codecs at no more code bytes: SQ, PQ, OPQ+PQ, IVF-PQ, OPQ+IVF-PQ, RQ and LSQ (see
`faiss_peer.py --help` for how each is fitted to B). Both are scored the same way:

  code B       what every vector costs: FAISS's sa_code_size, plus ceil(log2 nlist)/8 bytes of list id
               under IVF; vlattice's packed anchor id (ceil(log2 m) bits) plus its residual code
  total B      everything stored, over n: FAISS's faiss.serialize_index size of the filled index
               (codebooks, coarse centroids, 64-bit ids of the inverted lists), vlattice's file size
  MSE          mean over the base vectors of the squared L2 distance between vector and reconstruction
  recall       10-recall@10 of exhaustive float32 search over the reconstruction for the queries,
               against the true neighbours (the file's)
  seconds      FAISS: training and adding (the shared IVF coarse quantiser's training included);
               vlattice: its compress run less reading the input (--report's seconds total - load);
               wall seconds, and CPU seconds of all threads (vlattice's whole compress process)
  IVF recall, queries/s   vlattice's own search (`vlattice query --nprobe N --k 10`) at each --nprobe

Per budget the summary names FAISS's best codec (lowest MSE at no more code bytes), the ratio of
vlattice's MSE to its MSE and the difference of their recalls.

With --whole-file a budget B counts the whole file instead: vlattice runs `compress
--target-file-bytes B`, and FAISS's best is the codec, trained at any of the FAISS rows' code
budgets, with the lowest MSE whose serialized index takes at most B bytes per vector (its total B);
the FAISS rows come from --faiss-json (an earlier run's, at code budgets). Every FAISS codec has --faiss-limit
CPU seconds (all threads together; 1,200 are 10 minutes of 2 threads on cores of their own) to train and
add, in a process of its own; past that it reads "over limit", and its family's larger budgets are
not tried. CPU time, not wall time, so that a busy machine cuts off the same codecs as an idle one. Both tools get --threads threads (OpenMP wait policy passive unless
OMP_WAIT_POLICY says otherwise: on shared cores spinning threads steal the working ones' time).

Data: --data FILE.hdf5 in the ann-benchmarks layout (train, test, neighbors; the default,
Fashion-MNIST, is made by scripts/ann-hdf5 when missing), or --npy BASE.npy with --queries Q.npy and
--truth T.npy (ids, one row per query); the first --limit queries are used. Writes quality.json,
quality.md (the tables) and quality.png (MSE and recall against code bytes) to --out, and the FAISS
rows as faiss.jsonl, which --faiss-json takes back to score a new vlattice without retraining FAISS;
--vlattice-json takes vlattice's rows back from a quality.json, so that runs of one family each (on
a machine with more cores, say) join into one table. Rows taken back that were measured on another
n x d than the data given are refused.
The vlattice binary is $VLATTICE_BIN, else build/vlattice. Needs python3-faiss, python3-h5py,
python3-matplotlib (scripts/setup --bench); run with /usr/bin/python3.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

# Everything the run needs is checked before the first job: a missing package found after minutes of
# compressing would throw the work away.
try:
    import faiss  # noqa: F401 (scripts/faiss_peer.py needs it)
    import h5py
    import matplotlib
    import numpy as np
except ImportError as missing:
    sys.exit(f"quality: Python module '{missing.name}' is missing; install python3-faiss, python3-h5py, "
             "python3-matplotlib and python3-numpy (scripts/setup --bench does)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import faiss_peer  # noqa: E402
from harness import ENV, fmt, run, share_blas_kernels  # noqa: E402

DEFAULT_DATA = os.path.join(ROOT, "data/fashion-mnist-784-euclidean.hdf5")
# 32, 49, 98, 196, 392 and 784 bytes of Fashion-MNIST's 3,136 (d = 784 floats).
DEFAULT_BUDGETS = "1.0204%,1.5625%,3.125%,6.25%,12.5%,25%"


def children_cpu_seconds():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def budget_bytes(text, d):
    """A budget as whole code bytes per vector: as given, or a share of float32 rounded to the nearest byte."""
    try:
        value = float(text[:-1]) * 4 * d / 100 if text.endswith("%") else float(text)
    except ValueError:
        sys.exit(f"quality: --budgets: '{text}' is neither bytes nor a percentage")
    if round(value) < 1:
        sys.exit(f"quality: --budgets: '{text}' is less than one byte per vector at d = {d}")
    return int(round(value))


def load(a):
    """Base vectors, queries and their true neighbour ids (first 10), and the files vlattice reads them from."""
    if a.npy:
        x = np.load(a.npy).astype(np.float32)
        q = np.load(a.queries)[:a.limit].astype(np.float32)
        truth = np.load(a.truth)[:a.limit, :10]
        return x, q, truth, {"base": a.npy, "queries": a.queries, "truth": a.truth}
    with h5py.File(a.data, "r") as f:
        for name in ("train", "test", "neighbors"):
            if name not in f:
                sys.exit(f"quality: {a.data} has no dataset '{name}' (the ann-benchmarks layout has train, "
                         "test and neighbors)")
        x = f["train"][:].astype(np.float32)
        q = f["test"][:a.limit].astype(np.float32)
        truth = f["neighbors"][:a.limit, :10]
    return x, q, truth, {"base": a.data, "queries": a.data, "truth": a.data + ":neighbors"}


def vlattice_rows(a, vlattice, files, budget, x, q, truth):
    stem = os.path.join(a.out, f"vlattice-{budget}B")
    cmd = [vlattice, "compress", files["base"], "-o", stem + ".vlat",
           "--target-file-bytes" if a.whole_file else "--target-bytes", str(budget),
           "--threads", str(a.threads), "--device", a.device, "--quiet", "--report", stem + ".report.json"]
    if a.anchors:
        cmd += ["-m", str(a.anchors)]
    if a.vlattice_codec:
        cmd += ["--codec", a.vlattice_codec]
    start, cpu_start = time.perf_counter(), children_cpu_seconds()
    run("quality", cmd)
    wall, cpu = time.perf_counter() - start, children_cpu_seconds() - cpu_start
    with open(stem + ".report.json") as f:
        phases = json.load(f)["seconds"]
    os.remove(stem + ".report.json")
    seconds = phases["total"] - phases["load"]
    info = json.loads(run("quality", [vlattice, "info", "--json", stem + ".vlat"]))
    run("quality", [vlattice, "decompress", stem + ".vlat", "-o", stem + ".npy", "--device", a.device, "--quiet"])
    decoded = np.load(stem + ".npy")
    os.remove(stem + ".npy")
    row = {"tool": "vlattice", "budget": budget, "family": "vlattice",
           "codec": f"{info.get('codec', 'scalar')}, m = {info['m']}, "
                    + (info["product"]["description"] if info.get("product") else info["residual_widths"]),
           "status": "ok", "code_bytes": info["code_bytes_per_vector"],
           "total_bytes_per_vector": os.path.getsize(stem + ".vlat") / len(x),
           "mse": faiss_peer.squared_error(x, decoded),
           "recall10_at_10": faiss_peer.recall10(truth, faiss_peer.nearest10(decoded, q)),
           "seconds": seconds, "cpu_seconds": cpu, "wall_seconds": wall, "ivf": []}
    for nprobe in a.nprobe.split(","):
        found = json.loads(run("quality", [vlattice, "query", stem + ".vlat", "--queries", files["queries"], "--limit", str(len(q)),
                                "--k", "10", "--nprobe", nprobe, "--ground-truth", files["truth"],
                                "--threads", str(a.threads), "--device", a.device, "--json"]))
        row["ivf"].append({"nprobe": found["nprobe"], "recall10_at_10": found["recall"]["10-recall@10"],
                           "queries_per_second": found["queries_per_second"], "device": found["device"]})
    if not a.keep:
        os.remove(stem + ".vlat")
    print(f"quality: vlattice {budget} B: {row['code_bytes']:.2f} code B, mse {row['mse']:.6g}, "
          f"recall {row['recall10_at_10']:.4f}, {seconds:.1f} s", file=sys.stderr)
    return row


def taken_back(path, rows, n, d):
    """Rows of an earlier run, refused when they were measured on another shape of data (rows written
    before the shape was recorded carry none and are taken as they are)."""
    for r in rows:
        if (r.get("n", n), r.get("d", d)) != (n, d):
            sys.exit(f"quality: {path} holds rows measured on {r['n']} x {r['d']} vectors, this data is {n} x {d}")
    return rows


def faiss_rows(a, files, budgets, n, d):
    if a.faiss_json:
        found = []
        for path in a.faiss_json:
            with open(path) as f:
                found += taken_back(path, [json.loads(line) for line in f if line.strip()], n, d)
    else:
        # The interpreter running this script: the one whose FAISS was checked above.
        cmd = [sys.executable, os.path.join(ROOT, "scripts/faiss_peer.py"), "codecs", "--input", files["base"],
               "--budgets", ",".join(map(str, budgets)), "--families", a.faiss_families, "--nlist", str(a.nlist),
               "--limit", str(a.faiss_limit), "--threads", str(a.threads), "--queries", str(a.limit)]
        if a.npy:
            cmd += ["--query-file", a.queries, "--truth", a.truth]
        print(f"quality: FAISS: {' '.join(cmd)}", file=sys.stderr)
        found = []
        # Each row is written as it comes, so that a run stopped early keeps what it measured.
        with open(os.path.join(a.out, "faiss.jsonl"), "w") as saved, \
                open(os.path.join(a.out, "faiss.log"), "w") as log:
            peer = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True, env=ENV)
            for line in peer.stdout:
                saved.write(line)
                saved.flush()
                r = json.loads(line)
                found.append(r)
                print(f"quality: FAISS {r['budget']:g} B {r['codec'] or r['family']}: {r['status']}"
                      + (f", mse {r['mse']:.6g}" if r["status"] == "ok" else ""), file=sys.stderr)
            if peer.wait() != 0:
                sys.exit(f"quality: {' '.join(cmd)} failed ({peer.returncode}); see {a.out}/faiss.log")
    rows = []
    for r in found:
        # A whole-file budget compares every codec FAISS trained, whatever code budget it had.
        if a.whole_file or r["budget"] in budgets:
            r["tool"] = "FAISS"
            r["seconds"] = r.pop("train_add_seconds", None)
            r["cpu_seconds"] = r.pop("train_add_cpu_seconds", None)
            rows.append(r)
    return rows


def faiss_peers(whole_file, budget, rows):
    """FAISS's rows a budget compares with: at no more code bytes, or under --whole-file at no more
    total bytes per vector."""
    if whole_file:
        return [r for r in rows if r["tool"] == "FAISS" and r["status"] == "ok"
                and r["total_bytes_per_vector"] <= budget]
    return [r for r in rows if r["tool"] == "FAISS" and r["budget"] == budget and r["status"] == "ok"
            and r["code_bytes"] <= budget]


def summary(whole_file, budgets, rows):
    out = []
    for budget in budgets:
        peers = faiss_peers(whole_file, budget, rows)
        ours = next((r for r in rows if r["tool"] == "vlattice" and r["budget"] == budget), None)
        best = min(peers, key=lambda r: r["mse"], default=None)
        entry = {"budget": budget, "best_faiss": best and best["codec"], "best_faiss_mse": best and best["mse"],
                 "best_faiss_recall": best and best["recall10_at_10"]}
        if best and ours:
            entry["mse_ratio"] = ours["mse"] / best["mse"]
            entry["recall_difference"] = ours["recall10_at_10"] - best["recall10_at_10"]
        out.append(entry)
    return out


def tables(a, name, n, d, nq, budgets, rows, best):
    # Rows taken back with --faiss-json carry the limit they ran under.
    limits = sorted({r.get("limit_cpu_seconds", a.faiss_limit) for r in rows if r["tool"] == "FAISS"})
    lines = [f"{name}: {n} x {d}, {nq} queries, {a.threads} threads; vlattice m = {a.anchors or 'default'}, "
             f"codec {a.vlattice_codec or 'default'}; FAISS limit {' or '.join(map(str, limits)) or '-'} CPU s "
             "of training and adding per codec", "",
             f"Code B counts the IVF list id as ceil(log2 nlist)/8 = {faiss_peer.list_id_bytes(a.nlist):g} B per "
             f"vector (nlist {a.nlist}), the way vlattice counts its anchor id; total B is the serialized index "
             "(FAISS) or the file (vlattice) over n.", "",
             "| budget B | tool | codec | code B | total B | MSE | 10-recall@10 exhaustive | train+add s | CPU s |",
             "|---|---|---|---|---|---|---|---|---|"]
    for budget in budgets:
        # Under --whole-file each budget lists vlattice and FAISS's three best codecs that fit it.
        listed = ([r for r in rows if r["tool"] == "vlattice" and r["budget"] == budget]
                  + sorted(faiss_peers(True, budget, rows), key=lambda r: r["mse"])[:3]) if a.whole_file \
            else [r for r in rows if r["budget"] == budget]
        for r in listed:
            if r["status"] != "ok":
                lines.append(f"| {budget} | {r['tool']} | {r['codec'] or r['family']} | {r['status']} | | | | | |")
                continue
            tool = r["tool"] if r["tool"] == "vlattice" or not a.whole_file else f"FAISS ({r['budget']:g} code B)"
            lines.append(f"| {budget} | {tool} | {r['codec']} | {r['code_bytes']:.2f} | "
                         f"{r['total_bytes_per_vector']:.2f} | {r['mse']:.6g} | {r['recall10_at_10']:.4f} | "
                         f"{fmt(r['seconds'], '.1f')} | {fmt(r['cpu_seconds'], '.1f')} |")
    what = "total B per vector" if a.whole_file else "code B"
    lines += ["", f"Budgets count {what}.", "", "| budget B | best FAISS (lowest MSE) | its MSE | its recall | vlattice MSE / best | "
              "vlattice recall - best |", "|---|---|---|---|---|---|"]
    for s in best:
        lines.append(f"| {s['budget']} | {s['best_faiss'] or '-'} | {fmt(s['best_faiss_mse'], '.6g')} | "
                     f"{fmt(s['best_faiss_recall'], '.4f')} | {fmt(s.get('mse_ratio'), '.3f')} | "
                     f"{fmt(s.get('recall_difference'), '+.4f')} |")
    ivf = [r for r in rows if r["tool"] == "vlattice"]
    if ivf:
        lines += ["", "vlattice's own IVF search, k = 10:", "",
                  "| budget B | nprobe | 10-recall@10 | queries/s | device |", "|---|---|---|---|---|"]
        for r in ivf:
            for s in r["ivf"]:
                lines.append(f"| {r['budget']} | {s['nprobe']} | {s['recall10_at_10']:.4f} | "
                             f"{s['queries_per_second']:.0f} | {s['device']} |")
    return "\n".join(lines) + "\n"


def plot(path, title, rows, budgets, key):
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    groups = {}
    for r in rows:
        if r["status"] == "ok":
            groups.setdefault(r["family"], []).append(r)
    for family, pts in groups.items():
        pts.sort(key=lambda r: r[key])
        style = dict(marker="o", linewidth=2.5, color="black") if family == "vlattice" else dict(marker=".")
        label = family if family == "vlattice" else f"FAISS {family}"
        left.plot([r[key] for r in pts], [r["mse"] for r in pts], label=label, **style)
        right.plot([r[key] for r in pts], [r["recall10_at_10"] for r in pts], label=label, **style)
    for ax, what in ((left, "MSE (mean squared L2 error per vector)"),
                     (right, "10-recall@10, exhaustive search over the reconstruction")):
        ax.set_xscale("log")
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
        ax.set_xlabel("code bytes per vector" if key == "code_bytes" else "total bytes per vector (the whole file)")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    left.set_yscale("log")
    right.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    ap = argparse.ArgumentParser(prog="scripts/quality", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", help=f"HDF5 in the ann-benchmarks layout (default: {DEFAULT_DATA})")
    ap.add_argument("--npy", help="base vectors as .npy, in place of --data; needs --queries and --truth")
    ap.add_argument("--queries", help="with --npy: the query vectors (.npy)")
    ap.add_argument("--truth", help="with --npy: the true neighbour ids of each query (.npy, one row per query)")
    ap.add_argument("--limit", type=int, default=1000, help="queries used, the first ones (default 1000)")
    ap.add_argument("--budgets", default=DEFAULT_BUDGETS,
                    help="code bytes per vector, or shares of float32 (4 d bytes) such as 1.6%% rounded to "
                         f"the nearest byte; comma-separated (default {DEFAULT_BUDGETS.replace('%', '%%')})")
    ap.add_argument("--anchors", type=int, default=1024, help="vlattice -m; 0 leaves vlattice's default (default 1024)")
    ap.add_argument("--vlattice-codec", choices=["auto", "scalar", "pq", "rq"],
                    help="pass --codec to vlattice compress (default: not passed)")
    ap.add_argument("--nprobe", default="1,4,16,64", help="nprobe values of vlattice's own search (default 1,4,16,64)")
    ap.add_argument("--faiss-families", default=",".join(faiss_peer.FAMILIES),
                    help=f"FAISS codecs to run (default {','.join(faiss_peer.FAMILIES)})")
    ap.add_argument("--nlist", type=int, default=1024, help="FAISS IVF lists (default 1024)")
    ap.add_argument("--faiss-limit", type=int, default=1200,
                    help="CPU seconds (all threads) of training and adding allowed per FAISS codec (default 1200)")
    ap.add_argument("--faiss-json", help="take the FAISS rows from earlier runs' faiss.jsonl files (comma-separated) "
                    "instead of running it")
    ap.add_argument("--vlattice-json", help="take the vlattice rows from an earlier run's quality.json instead of "
                    "running it (the same data and budgets)")
    ap.add_argument("--whole-file", action="store_true",
                    help="budgets count the whole file: vlattice --target-file-bytes, FAISS's best by total bytes "
                         "(needs --faiss-json)")
    ap.add_argument("--no-vlattice", action="store_true", help="FAISS only")
    ap.add_argument("--threads", type=int, default=2, help="threads of both tools (default 2)")
    ap.add_argument("--device", default="cpu", help="vlattice --device (default cpu, as FAISS runs on the CPU)")
    ap.add_argument("--keep", action="store_true", help="keep vlattice's .vlat files in --out")
    ap.add_argument("--out", default="quality-out", help="output folder (default quality-out)")
    a = ap.parse_args()

    if a.npy and a.data:
        ap.error("give --data or --npy, not both")
    if a.npy and not (a.queries and a.truth):
        ap.error("--npy needs --queries and --truth")
    if not a.npy and (a.queries or a.truth):
        ap.error("--queries and --truth go with --npy; an HDF5 --data holds its own")
    a.faiss_json = a.faiss_json.split(",") if a.faiss_json else []
    for path in (a.npy, a.queries, a.truth, a.data, a.vlattice_json, *a.faiss_json):
        if path and not os.path.isfile(path):
            sys.exit(f"quality: {path}: no such file")
    vlattice = os.environ.get("VLATTICE_BIN", os.path.join(ROOT, "build/vlattice"))
    if a.whole_file and not a.faiss_json:
        ap.error("--whole-file compares with FAISS rows of an earlier run: give --faiss-json")
    if a.no_vlattice and a.vlattice_json:
        ap.error("--no-vlattice and --vlattice-json exclude each other")
    if not a.no_vlattice and not a.vlattice_json and not os.access(vlattice, os.X_OK):
        sys.exit(f"quality: no vlattice binary at {vlattice}; build it (scripts/setup) or set VLATTICE_BIN")
    share_blas_kernels(vlattice)
    if not a.npy and not a.data:
        a.data = DEFAULT_DATA
        if not os.path.exists(a.data):
            run("quality", [os.path.join(ROOT, "scripts/ann-hdf5"), "fashion-mnist", a.data])
    os.makedirs(a.out, exist_ok=True)

    x, q, truth, files = load(a)
    n, d = x.shape
    budgets = sorted({budget_bytes(b, d) for b in a.budgets.split(",")})
    if a.vlattice_json:
        with open(a.vlattice_json) as f:
            earlier = json.load(f)
        if earlier.get("whole_file", False) != a.whole_file:
            sys.exit(f"quality: {a.vlattice_json} holds rows of " + ("whole-file" if earlier.get("whole_file") else
                     "code-byte") + " budgets; this run's budgets are " + ("whole-file" if a.whole_file else "code bytes"))
        rows = taken_back(a.vlattice_json, [dict(r, n=earlier["n"], d=earlier["d"]) for r in earlier["rows"]
                                            if r["tool"] == "vlattice" and r["budget"] in budgets], n, d)
    elif a.no_vlattice:
        rows = []
    else:
        rows = [vlattice_rows(a, vlattice, files, b, x, q, truth) for b in budgets]
    rows += faiss_rows(a, files, budgets, n, d)
    order = {family: i for i, family in enumerate(faiss_peer.FAMILIES + ["vlattice"])}
    rows.sort(key=lambda r: (r["budget"], order[r["family"]]))
    best = summary(a.whole_file, budgets, rows)

    name = os.path.basename(files["base"])
    text = tables(a, name, n, d, len(q), budgets, rows, best)
    print("\n" + text)
    with open(os.path.join(a.out, "quality.md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, "quality.json"), "w") as f:
        json.dump({"data": files["base"], "n": n, "d": d, "queries": len(q), "threads": a.threads,
                   "anchors": a.anchors, "vlattice_codec": a.vlattice_codec, "whole_file": a.whole_file,
                   "nlist": a.nlist,
                   "faiss_limit_seconds": a.faiss_limit, "budgets": budgets, "rows": rows, "summary": best}, f, indent=2)
    plot(os.path.join(a.out, "quality.png"), f"{name}: {n} x {d}, {len(q)} queries", rows, budgets,
         "total_bytes_per_vector" if a.whole_file else "code_bytes")
    print(f"wrote {a.out}/quality.md, quality.json, quality.png" + ("" if a.faiss_json else " and faiss.jsonl"))


if __name__ == "__main__":
    main()
