#!/usr/bin/env python3
"""Checks the assignments in a .vlat against a float64 argmin computed here, independently of
vlattice: the file is read from its specification (docs/format.md), the distances in float64 with
PyTorch on the GPU when there is one, else with numpy, ties to the lowest anchor.

  assign_check.py --input base.fvecs --vlat base.vlat [--storage f32|f16|bf16]

--storage must be the one of the run: under f16/bf16 vlattice fits the points rounded as
round_to_format does (scaled by 2^e so the largest |coordinate| lies in [2^14, 2^15)), and so does
this check. Prints one JSON object: n, how many assignments differ from the float64 argmin, and of
those how many are worse than it by more than float64 rounding of the GEMM form (1e-9 relative).
"""
import argparse, json, math, struct, sys
import numpy as np

try:
    import torch
except ImportError:
    torch = None


def read_vectors(path):
    if path.endswith('.npy'):
        return np.load(path).astype(np.float32)
    if path.endswith('.fvecs'):
        raw = np.fromfile(path, dtype=np.int32)
        d = raw[0]
        return raw.reshape(-1, d + 1)[:, 1:].view(np.float32).copy()
    sys.exit(f'assign_check: unsupported input {path}')


def read_vlat(path):
    """Anchors (float32) and assignments of a version 1 or 2 .vlat, per docs/format.md."""
    raw = open(path, 'rb').read()
    if raw[:8] != b'VLATTICE':
        sys.exit(f'assign_check: {path}: not a .vlat file')
    n, = struct.unpack_from('<Q', raw, 12)
    d, m = struct.unpack_from('<II', raw, 20)
    storage, bits = raw[29], raw[31]
    sections, = struct.unpack_from('<I', raw, 32)
    offset, found = 44, {}
    for _ in range(sections):
        tag = raw[offset:offset + 4].decode()
        length, = struct.unpack_from('<Q', raw, offset + 4)
        found[tag] = raw[offset + 12:offset + 12 + length]
        offset += 12 + length + 8
    dtype = np.float16 if storage == 1 else np.float32
    anchors = np.frombuffer(found['ANCH'], dtype=dtype).astype(np.float32).reshape(m, d)
    if bits == 0:
        return anchors, np.zeros(n, dtype=np.int64)
    stream = np.unpackbits(np.frombuffer(found['ASGN'], dtype=np.uint8), bitorder='little')
    fields = stream[:n * bits].reshape(n, bits).astype(np.int64)
    return anchors, fields @ (np.int64(1) << np.arange(bits, dtype=np.int64))


def round_points(x, storage):
    if storage == 'f32':
        return x
    largest = float(np.abs(x).max())
    e = 0 if largest == 0 else max(-60, min(60, 15 - math.frexp(largest)[1]))
    scaled = x * np.float32(2.0 ** e)
    if storage == 'f16':
        rounded = scaled.astype(np.float16).astype(np.float32)
    else:  # to nearest bfloat16, ties to even
        bits = scaled.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7fff + ((bits >> 16) & 1)) & 0xffff0000
        rounded = bits.astype(np.uint32).view(np.float32)
    return rounded * np.float32(2.0 ** -e)


def mismatches(x, c, stored):
    """Per chunk: (points whose stored anchor is not the float64 argmin, stored ids, argmin ids)."""
    if torch is not None and torch.cuda.is_available():
        x = torch.from_numpy(x).cuda().double()
        c = torch.from_numpy(c).cuda().double()
        stored = torch.from_numpy(stored).cuda()
        to_numpy = lambda t: t.cpu().numpy()
        argmin = lambda t: t.argmin(1)  # the first of equal minima
    else:
        x, c = x.astype(np.float64), c.astype(np.float64)
        to_numpy = lambda t: t
        argmin = lambda t: t.argmin(1)  # the first of equal minima
    cc = (c * c).sum(1)
    chunk = max(1, (1 << 26) // max(1, c.shape[0]))
    for s in range(0, x.shape[0], chunk):
        xs = x[s:s + chunk]
        best = argmin((xs * xs).sum(1)[:, None] - 2 * xs @ c.T + cc[None])
        mine = stored[s:s + chunk]
        off = to_numpy((best != mine).nonzero()[0] if torch is None or not torch.cuda.is_available()
                       else (best != mine).nonzero().flatten())
        if off.size:
            yield s + off, to_numpy(mine)[off], to_numpy(best)[off]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--input', required=True)
    ap.add_argument('--vlat', required=True)
    ap.add_argument('--storage', default='f32', choices=('f32', 'f16', 'bf16'))
    a = ap.parse_args()
    x = round_points(read_vectors(a.input), a.storage)
    anchors, stored = read_vlat(a.vlat)
    differ = worse = 0
    largest_gap = 0.0
    for rows, mine, best in mismatches(x, anchors, stored):
        # The differing points again, in float64 in the direct form sum (x - c)^2.
        xr = x[rows].astype(np.float64)
        d_mine = ((xr - anchors[mine]) ** 2).sum(1)
        d_best = ((xr - anchors[best]) ** 2).sum(1)
        gap = (d_mine - d_best) / np.maximum(np.abs(d_best), 1e-300)
        differ += rows.size
        worse += int((gap > 1e-9).sum())
        largest_gap = max(largest_gap, float(gap.max()))
    print(json.dumps({'n': int(x.shape[0]), 'differ_from_fp64': differ, 'worse_than_fp64_rounding': worse,
                      'largest_relative_gap': largest_gap}))


if __name__ == '__main__':
    main()
