"""What the benchmark scripts share: the environment their tools run in, running a tool, and table cells."""
import os
import subprocess
import sys

# Passive unless the caller chose: on shared cores, threads spinning at a barrier take the time
# slices of the ones working.
ENV = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))


def share_blas_kernels(vlattice):
    """Gives every tool run from here the OpenBLAS kernels vlattice runs (its --version names them),
    unless OPENBLAS_CORETYPE is set already. Debian's OpenBLAS falls back to its SSE3 kernels on Intel
    CPUs newer than it knows; vlattice restarts itself with the CPU's, and a peer on the same library
    gets them too, so that neither tool's time carries the other's BLAS."""
    if "OPENBLAS_CORETYPE" in ENV or not os.access(vlattice, os.X_OK):
        return
    version = subprocess.run([vlattice, "--version"], capture_output=True, text=True, env=ENV).stdout
    for line in version.splitlines():
        if line.startswith("OpenBLAS kernels: "):
            ENV["OPENBLAS_CORETYPE"] = line.split(": ", 1)[1].strip()


def run(script, cmd):
    """cmd's standard output; on failure, exits naming the script, the command and what it printed."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        sys.exit(f"{script}: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def fmt(value, spec, none="-"):
    """value formatted by spec, or `none` for a missing value."""
    return none if value is None else format(value, spec)
