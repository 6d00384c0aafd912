#!/usr/bin/env bash
# compress under mpirun on 1, 2, 3 and 4 ranks writes the .vlat of one process, byte for byte, on
# Fashion-MNIST and a Gaussian mixture; a rank that meets a bad row, or is killed, ends every rank's
# run with an error and leaves no output.
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
