#!/usr/bin/env bash
# compress under mpirun on 1, 2, 3 and 4 ranks writes the .vlat of one process, byte for byte, on
# Fashion-MNIST and a Gaussian mixture (angular with float16 anchors, and a --train-sample with and
# without residual codes, too); a rank that meets a bad row, or is killed, ends every rank's
# run with an error and leaves no output, as do the options a run over ranks refuses, too many ranks
# for the rows, and a plugin that does not load.
#   tests/mpi/check_ranks.sh VLATTICE_CLI SOURCE_DIR
set -euo pipefail
cli=$1 source=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Open MPI refuses root unless told; the ranks outnumber CI's cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ranks() { mpirun --oversubscribe -np "$@"; }
fail() { echo "check_ranks: $*" >&2; exit 1; }

/usr/bin/python3 - "$work" <<'PY'
import gzip, sys, numpy as np
raw = gzip.open('/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz').read()
np.save(sys.argv[1] + '/fashion.npy', np.frombuffer(raw, dtype=np.uint8, offset=16).reshape(-1, 784))
PY
/usr/bin/python3 "$source/scripts/mixture.py" 20000 24 "$work/mixture.fvecs" --clusters 60 --seed 3

same_on_ranks() {  # INPUT OPTIONS...
  local input=$1
  shift
  "$cli" compress "$input" -o "$work/one.vlat" --threads 1 --quiet "$@"
  for np in 1 2 3 4; do
    ranks "$np" "$cli" compress "$input" -o "$work/ranks.vlat" --threads 1 --quiet "$@"
    cmp "$work/one.vlat" "$work/ranks.vlat" || fail "$np ranks wrote another file than one process for $input $*"
    echo "check_ranks: $(basename "$input") $*: $np ranks wrote one process's file"
  done
}
same_on_ranks "$work/fashion.npy" -m 64 --iters 8
same_on_ranks "$work/mixture.fvecs" -m 80 --iters 20 --maintenance-every 3 --min-gain 0
same_on_ranks "$work/mixture.fvecs" -m 40 --iters 10 --metric angular --anchor-storage f16
same_on_ranks "$work/mixture.fvecs" -m 40 --iters 10 --train-sample 5000
same_on_ranks "$work/mixture.fvecs" -m 40 --iters 10 --train-sample 5000 --bits 4
same_on_ranks "$work/mixture.fvecs" -m 40 --iters 10 --train-sample 5000 --target-bytes 8

# A NaN in row 15,000 of 20,000, which rank 2 of 3 reads.
/usr/bin/python3 - "$work" <<'PY'
import sys, numpy as np
raw = np.fromfile(sys.argv[1] + '/mixture.fvecs', dtype=np.float32).reshape(20000, 25)
raw[15000, 4] = np.nan
raw.tofile(sys.argv[1] + '/bad.fvecs')
PY
mkdir "$work/out"
rc=0
ranks 3 "$cli" compress "$work/bad.fvecs" -o "$work/out/bad.vlat" -m 16 --threads 1 --quiet 2>"$work/bad.err" || rc=$?
[[ $rc -ne 0 ]] || fail "a NaN on rank 2 still let the run succeed"
grep -q "rank 2 of 3: .*row 15000" "$work/bad.err" || { cat "$work/bad.err" >&2; fail "the error does not name rank 2 and the row"; }
[[ -z "$(ls -A "$work/out")" ]] || fail "a failed run left $(ls -A "$work/out")"
echo "check_ranks: a bad row on rank 2 of 3 ended the run (exit $rc), naming the rank and the row, with no output"

# What a run over ranks refuses, each with an error that says why and no output.
refused() {  # WHAT PATTERN COMMAND...
  local what=$1 pattern=$2 rc=0
  shift 2
  "$@" 2>"$work/refused.err" || rc=$?
  [[ $rc -ne 0 ]] || fail "$what: the run succeeded"
  grep -q -- "$pattern" "$work/refused.err" || { cat "$work/refused.err" >&2; fail "$what: no '$pattern' in the error"; }
  [[ -z "$(ls -A "$work/out")" ]] || fail "$what: the run left $(ls -A "$work/out")"
  echo "check_ranks: $what: refused (exit $rc)"
}
refused "a residual code over ranks without a sample" "rank 0 of 2: under mpirun or srun, a residual code .* give --train-sample N" \
  ranks 2 "$cli" compress "$work/mixture.fvecs" -o "$work/out/x.vlat" -m 16 --bits 4 --quiet
refused "a whole-file budget over ranks" "compress does not take a whole-file budget" \
  ranks 2 "$cli" compress "$work/mixture.fvecs" -o "$work/out/x.vlat" -m 16 --target-file-bytes 40 \
  --train-sample 5000 --quiet
refused "train over ranks" "train is not run over several processes" \
  ranks 2 "$cli" train "$work/mixture.fvecs" -o "$work/out/x.vlat" -m 16 --quiet
head -c $((3000 * 25 * 4)) "$work/mixture.fvecs" >"$work/small.fvecs"
refused "4 ranks for 3 blocks of rows" "3000 rows leave some of the 4 ranks without a block of 1,024 rows" \
  ranks 4 "$cli" compress "$work/small.fvecs" -o "$work/out/x.vlat" -m 16 --quiet
refused "a missing MPI plugin" "the MPI plugin $work/none.so does not load" \
  env OMPI_COMM_WORLD_SIZE=1 VLATTICE_MPI_PLUGIN="$work/none.so" "$cli" compress "$work/small.fvecs" \
  -o "$work/out/x.vlat" -m 16 --quiet

# A rank killed during the fit.
rc=0
ranks 3 "$cli" compress "$work/fashion.npy" -o "$work/out/killed.vlat" -m 256 --iters 200 --min-gain 0 --threads 1 \
  --quiet 2>"$work/killed.err" &
job=$!
for _ in $(seq 100); do
  # A rank's command line starts with the CLI; mpirun's with mpirun.
  victim=$(pgrep -f "^$cli compress $work/fashion.npy -o $work/out/killed.vlat" | tail -1 || true)
  [[ -z "$victim" ]] || break
  sleep 0.1
done
[[ -n "$victim" ]] || fail "no rank of the run to kill was found"
sleep 2
kill -9 "$victim"
wait "$job" || rc=$?
[[ $rc -ne 0 ]] || fail "the run went on after a rank was killed"
[[ -z "$(ls -A "$work/out")" ]] || fail "a killed run left $(ls -A "$work/out")"
echo "check_ranks: a killed rank ended the run (exit $rc) with no output"

# batch over 3 ranks: five jobs of different sizes and one that fails, shared out and written as one
# process writes them (the same .vlat files, the summary's rows in job order, exit 1 for the failed
# job); run again, the finished jobs are skipped and the failed one runs again.
mkdir "$work/jobs"
for rows in 2000 9000 4000 6000 3000; do
  head -c $((rows * 25 * 4)) "$work/mixture.fvecs" >"$work/jobs/mix$rows.fvecs"
done
printf 'not vectors' >"$work/jobs/broken.fvecs"
jobs=("$work"/jobs/mix2000.fvecs "$work"/jobs/mix9000.fvecs "$work"/jobs/broken.fvecs "$work"/jobs/mix4000.fvecs
  "$work"/jobs/mix6000.fvecs "$work"/jobs/mix3000.fvecs)
batch_exit() {  # OUTDIR [LAUNCHER...]: runs the batch, prints its exit status
  local out=$1 rc=0
  shift
  "$@" "$cli" batch "${jobs[@]}" -o "$out" -m 24 --iters 10 --threads 1 --quiet 2>>"$work/batch.err" || rc=$?
  echo "$rc"
}
[[ $(batch_exit "$work/batch-one") == 1 ]] || fail "one process's batch did not exit 1 for its failed job"
[[ $(batch_exit "$work/batch-ranks" ranks 3) == 1 ]] || { cat "$work/batch.err" >&2; fail "batch over 3 ranks did not exit 1"; }
for name in mix2000 mix9000 mix4000 mix6000 mix3000; do
  cmp "$work/batch-one/$name.vlat" "$work/batch-ranks/$name.vlat" || fail "batch over 3 ranks wrote another $name.vlat"
done
/usr/bin/python3 - "$work" <<'PY' || fail "the summary of batch over 3 ranks differs from one process's"
import json, sys
one, ranks = (json.load(open(f'{sys.argv[1]}/{d}/summary.json')) for d in ('batch-one', 'batch-ranks'))
key = lambda rows: [(r['dataset'], r['status'], r.get('m')) for r in rows]
assert key(one) == key(ranks), (key(one), key(ranks))
assert [r['status'] for r in ranks] == ['ok'] * 2 + ['failed'] + ['ok'] * 3, key(ranks)
PY
[[ $(batch_exit "$work/batch-ranks" ranks 3) == 1 ]] || fail "batch over 3 ranks, run again, did not exit 1"
/usr/bin/python3 - "$work" <<'PY' || fail "batch over 3 ranks, run again, did not skip its finished jobs"
import json, sys
rows = json.load(open(f'{sys.argv[1]}/batch-ranks/summary.json'))
assert [r['status'] for r in rows] == ['skipped'] * 2 + ['failed'] + ['skipped'] * 3, rows
PY
echo "check_ranks: batch over 3 ranks wrote one process's files and summary, and resumed"
