#!/usr/bin/python3
"""linetime.py -- when a command prints some lines.

    linetime.py PATTERN... -- CMD [ARG...]

Runs CMD with its stdout and stderr read here, prints for each PATTERN the
milliseconds from the start to the first line containing it (-1 if none
came), on one line, then waits for CMD and exits with its status.
bench/run_link.sh times a trainer's start and its restore under ckptrun
recover with it ('"event":"connect"', "resumed from", "starting fresh").
"""
import subprocess
import sys
import time

sep = sys.argv.index("--")
patterns, cmd = sys.argv[1:sep], sys.argv[sep + 1:]
t0 = time.monotonic()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
at = [-1] * len(patterns)
tail = []
for line in p.stdout:
    for k, pat in enumerate(patterns):
        if at[k] < 0 and pat in line:
            at[k] = round((time.monotonic() - t0) * 1000)
    tail = (tail + [line])[-20:]
rc = p.wait()
if rc:
    sys.stderr.write("".join(tail))
print(" ".join(str(a) for a in at))
sys.exit(rc)
