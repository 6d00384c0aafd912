"""Whole runs on a large input, each build in turn on the same file: wall time, the process's peak
memory, and the report's phases (load, the points' upload, k-means++, the iterations, coding,
writing), with the ratios the out-of-memory work is held to.

  bench_large.py INPUT [--build NAME=PATH ...] [--runs K] [-- compress options ...]
Each --build (default: vlattice=build/vlattice) runs `PATH compress INPUT -o OUT --report R` with
the options after --, once per run; the table has one row per build and run. Options after PATH
in a --build are that build's own ("held=b/vlattice", "streamed=b/vlattice --gpu-memory 12GiB"
compare two settings of one build). A build whose
bin/vlattice lies in a folder with a lib/ beside it (a GPU bundle) runs with that lib/ on
LD_LIBRARY_PATH. peak/file is the process's peak resident memory over the input file's size;
wall/fit is the wall time over k-means++ and the iterations. "other fit" is what the fit spends
outside its phases (checking the points; in older builds, rounding a copy of them). A build that
does not report the upload apart counts it in k-means++. After the table come each run's seconds
in the iterations' phases (assign, reduce, update, maintenance, energy), and a line that says
whether every run wrote the same .vlat, byte for byte, or lists each run's SHA-256.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

from harness import ENV, fmt


def run_once(binary, input_path, options, out_dir):
    env = dict(ENV)
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(binary))), "lib")
    if os.path.isdir(lib):
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    out = os.path.join(out_dir, "out.vlat")
    report = os.path.join(out_dir, "report.json")
    cmd = [binary, "compress", input_path, "-o", out, "--report", report, "-q"] + options
    start = time.time()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    output = child.stdout.read()
    # wait4 gives this child's own peak, which ru_maxrss over all children would hide behind a larger one.
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.time() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        sys.exit(f"bench_large.py: {' '.join(cmd)} failed ({child.returncode}):\n{output}")
    with open(report) as f:
        seconds = json.load(f)["seconds"]
    os.remove(report)
    digest = hashlib.sha256()
    with open(out, "rb") as f:
        for block in iter(lambda: f.read(1 << 24), b""):
            digest.update(block)
    return wall, usage.ru_maxrss * 1024, seconds, digest.hexdigest()


def main():
    parser = argparse.ArgumentParser(prog="bench_large.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("input")
    parser.add_argument("--build", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--runs", type=int, default=1)
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = parser.parse_args(argv[:cut])
    options = argv[cut + 1:]
    builds = [[name] + spec.split() for name, spec in (b.split("=", 1) for b in a.build)] or \
        [["vlattice", "build/vlattice"]]
    file_bytes = os.path.getsize(a.input)
    print(f"input {a.input}: {file_bytes / 1e9:.2f} GB; options: {' '.join(options)}")
    print("| build | wall s | load | upload | k-means++ | iterations | other fit | validation | code | write "
          "| peak GB | peak/file | wall/fit |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    digests = []
    phases = []
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(a.input))) as out_dir:
        for run in range(a.runs):
            for name, binary, *own in builds:
                wall, peak, s, digest = run_once(binary, a.input, options + own, out_dir)
                digests.append((f"{name} run {run + 1}", digest))
                upload = s.get("init_upload")  # builds before it was reported have none
                seeding = s["init"] - (upload or 0.0)
                iterations = sum(s[p] for p in ("assign", "reduce", "update", "maintenance", "energy"))
                # In the fit but in no phase: its checks of the points and, before the fit used points
                # the storage format holds as they are, their rounded copy.
                other = s["fit"] - s["init"] - iterations - s["validation"]
                print(f"| {name} | {wall:.1f} | {s['load']:.2f} | {fmt(upload, '.2f')} | {seeding:.2f} "
                      f"| {iterations:.2f} | {other:.2f} | {s['validation']:.2f} | {s['code']:.2f} | {s['write']:.2f} "
                      f"| {peak / 1e9:.2f} | {peak / file_bytes:.2f} | {wall / (seeding + iterations):.2f} |",
                      flush=True)
                phases.append(f"{name} run {run + 1}: " + ", ".join(
                    f"{p} {s[p]:.2f}" for p in ("assign", "reduce", "update", "maintenance", "energy")))
    print("the iterations' phases (s):")
    for line in phases:
        print("  " + line)
    if len({d for _, d in digests}) == 1:
        print(f"every run wrote the same .vlat (sha256 {digests[0][1]})")
    else:
        print("the runs wrote different .vlat files:")
        for label, digest in digests:
            print(f"  {label}: sha256 {digest}")


if __name__ == "__main__":
    main()
