"""What the benchmark scripts share: the environment their tools run in, running a tool, and table cells."""
import os
import subprocess
import sys

# Passive unless the caller chose: on shared cores, threads spinning at a barrier take the time
# slices of the ones working.
ENV = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))


def run(script, cmd):
    """cmd's standard output; on failure, exits naming the script, the command and what it printed."""
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    if done.returncode != 0:
        sys.exit(f"{script}: {' '.join(cmd)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


def fmt(value, spec, none="-"):
    """value formatted by spec, or `none` for a missing value."""
    return none if value is None else format(value, spec)
