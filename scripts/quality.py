"""scripts/quality: vlattice's rate-distortion table and plot beside FAISS's codecs.

For each budget vlattice compresses the `train` set (`--target-ratio`), decodes it, and is scored
exactly as scripts/faiss_peer.py scores FAISS: reconstruction MSE over the train set and
10-recall@10 of exhaustive float32 search over the reconstruction for the first --queries `test`
vectors, against exhaustive search over the originals. vlattice's own IVF search (`vlattice query`
at --nprobe) adds its recall and queries per second. Code bytes per vector count what every vector
costs (FAISS's code sizes, vlattice's packed id + residual code); total bytes add everything per
file: FAISS's codebooks, coarse centroids and inverted-list ids, vlattice's header, anchors, ranges
and metadata.
"""
import argparse, json, os, subprocess, sys, time

# Everything the run needs is checked before the first job: a missing package found after minutes of
# compressing would throw the work away.
try:
    import faiss
    import h5py
    import matplotlib
    import numpy as np
except ImportError as missing:
    sys.exit(f"quality: Python module '{missing.name}' is missing; install python3-faiss, python3-h5py, "
             "python3-matplotlib and python3-numpy (scripts/setup --bench does)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode != 0:
        sys.exit(f"quality: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def faiss_total_bytes(spec, n, d, code):
    """A FAISS index's size beside its codes: trained tables and, for IVF, the ids of its lists."""
    tables = 0
    ids = 0
    for part in spec.split(','):
        if part.startswith('IVF'):
            tables += int(part[3:]) * d * 4   # coarse centroids
            ids = 8 * n                       # each inverted list stores 64-bit ids
        elif part.startswith('SQ'):
            tables += 2 * d * 4               # per-dimension min and range
        elif part.startswith('PQ'):
            tables += 256 * d * 4             # M codebooks of 256 centroids of d/M floats
    return n * code + tables + ids


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--data', default=os.path.join(ROOT, 'data/fashion-mnist-784-euclidean.hdf5'))
    ap.add_argument('--budgets', default='1.6%,3.1%,6.25%,12.5%,25.1%')
    ap.add_argument('--anchors', type=int, default=1024)
    ap.add_argument('--nprobe', type=int, default=32)
    ap.add_argument('--queries', type=int, default=1000)
    ap.add_argument('--device', default='auto')
    ap.add_argument('--out', default='quality-out')
    ap.add_argument('--faiss-json', help='reuse the JSON lines of an earlier scripts/faiss_peer.py codecs run')
    a = ap.parse_args()

    vlattice = os.environ.get('VLATTICE_BIN', os.path.join(ROOT, 'build/vlattice'))
    if not os.access(vlattice, os.X_OK):
        sys.exit(f"quality: no vlattice binary at {vlattice}; build it (scripts/setup) or set VLATTICE_BIN")
    if a.faiss_json and not os.path.isfile(a.faiss_json):
        sys.exit(f"quality: --faiss-json {a.faiss_json}: no such file")
    if not os.path.exists(a.data):
        run([os.path.join(ROOT, 'scripts/ann-hdf5'), 'fashion-mnist', a.data])
    os.makedirs(a.out, exist_ok=True)

    with h5py.File(a.data, 'r') as f:
        x = f['train'][:].astype(np.float32)
        q = f['test'][:a.queries].astype(np.float32)
    n, d = x.shape
    flat = faiss.IndexFlatL2(d)
    flat.add(x)
    _, truth = flat.search(q, 10)

    def exhaustive_recall(xr):
        index = faiss.IndexFlatL2(d)
        index.add(xr)
        _, got = index.search(q, 10)
        return float(np.mean([len(set(truth[i]) & set(got[i])) / 10 for i in range(len(q))]))

    rows = []
    for budget in a.budgets.split(','):
        stem = os.path.join(a.out, 'vlattice-' + budget.rstrip('%').replace('.', '_'))
        start = time.perf_counter()
        run([vlattice, 'compress', a.data, '-o', stem + '.vlat', '-m', str(a.anchors), '--target-ratio', budget,
             '--device', a.device, '--quiet'])
        seconds = time.perf_counter() - start
        info = json.loads(run([vlattice, 'info', '--json', stem + '.vlat']))
        run([vlattice, 'decompress', stem + '.vlat', '-o', stem + '.npy', '--device', a.device, '--quiet'])
        xr = np.load(stem + '.npy')
        os.remove(stem + '.npy')
        found = json.loads(run([vlattice, 'query', stem + '.vlat', '--queries', a.data, '--limit', str(a.queries),
                                '--k', '10', '--nprobe', str(a.nprobe), '--ground-truth', a.data + ':neighbors',
                                '--device', a.device, '--json']))
        rows.append({'tool': 'vlattice', 'setting': f"m={info['m']}, {info['residual_widths']} (budget {budget})",
                     'bytes_per_vector': info['code_bytes_per_vector'], 'total_bytes': info['total_bytes'],
                     'mse': float(((x.astype(np.float64) - xr) ** 2).sum(1).mean()),
                     'recall10_at_10': exhaustive_recall(xr), 'ivf_recall10_at_10': found['recall']['10-recall@10'],
                     'ivf_qps': found['queries_per_second'], 'nprobe': found['nprobe'], 'device': found['device'],
                     'compress_seconds': seconds})
        print(f"quality: vlattice {budget}: {rows[-1]['bytes_per_vector']:.2f} B/vector, mse {rows[-1]['mse']:.1f}, "
              f"recall {rows[-1]['recall10_at_10']:.4f}", file=sys.stderr)

    if a.faiss_json:
        lines = open(a.faiss_json).read().splitlines()
    else:
        lines = run(['/usr/bin/python3', os.path.join(ROOT, 'scripts/faiss_peer.py'), 'codecs', '--input', a.data,
                     '--queries', str(a.queries)]).splitlines()
    for line in lines:
        r = json.loads(line)
        rows.append({'tool': 'FAISS', 'setting': r['codec'], 'bytes_per_vector': r['bytes_per_vector'],
                     'total_bytes': faiss_total_bytes(r['codec'], n, d, r['bytes_per_vector']), 'mse': r['mse'],
                     'recall10_at_10': r['recall10_at_10']})

    rows.sort(key=lambda r: (r['bytes_per_vector'], r['tool']))
    raw = 4.0 * n * d
    device = next(r['device'] for r in rows if r['tool'] == 'vlattice')
    print(f"\n{os.path.basename(a.data)}: {n} x {d}, first {len(q)} test queries; vlattice m = {a.anchors}, "
          f"IVF search at nprobe {a.nprobe} on the {device}\n")
    print('| tool | setting | code B/vector | ratio to float32 | total bytes | total ratio | MSE | 10-recall@10 '
          '(exhaustive) | IVF 10-recall@10 | IVF queries/s |')
    print('|---|---|---|---|---|---|---|---|---|---|')
    for r in rows:
        ivf = (f"{r['ivf_recall10_at_10']:.4f} | {r['ivf_qps']:.0f}" if 'ivf_qps' in r else '- | -')
        print(f"| {r['tool']} | {r['setting']} | {r['bytes_per_vector']:.2f} | {100 * r['bytes_per_vector'] / (4 * d):.2f} % "
              f"| {r['total_bytes']:,} | {100 * r['total_bytes'] / raw:.2f} % | {r['mse']:,.0f} | {r['recall10_at_10']:.4f} "
              f"| {ivf} |")
    with open(os.path.join(a.out, 'quality.json'), 'w') as f:
        json.dump({'data': a.data, 'n': n, 'd': d, 'queries': len(q), 'rows': rows}, f, indent=2)

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for tool, style in (('vlattice', 'o-'), ('FAISS', 's')):
        pts = [r for r in rows if r['tool'] == tool]
        ax.plot([r['bytes_per_vector'] for r in pts], [r['recall10_at_10'] for r in pts], style, label=tool)
        for r in pts:
            if tool == 'FAISS':
                ax.annotate(r['setting'], (r['bytes_per_vector'], r['recall10_at_10']), fontsize=7,
                            textcoords='offset points', xytext=(4, -10))
    ax.set_xscale('log')
    ax.set_xlabel('code bytes per vector')
    ax.set_ylabel('10-recall@10, exhaustive search over the reconstruction')
    ax.set_title(f"{os.path.basename(a.data)}: {len(q)} queries")
    ax.grid(True, which='both', alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, 'quality.png'), dpi=120)
    print(f"\nwrote {a.out}/quality.json and {a.out}/quality.png")


if __name__ == '__main__':
    main()
