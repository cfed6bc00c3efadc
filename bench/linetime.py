#!/usr/bin/python3
"""linetime.py -- how long a command takes to print a line.

    linetime.py PATTERN CMD [ARG...]

Runs CMD with its stdout and stderr read here, prints the milliseconds from
the start to the first line containing PATTERN (-1 if none came), then
waits for CMD and exits with its status. bench/run_link.sh times a
trainer's start and resume with it ("starting fresh", "resumed from").
"""
import subprocess
import sys
import time

pattern = sys.argv[1]
t0 = time.monotonic()
p = subprocess.Popen(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
at = -1
tail = []
for line in p.stdout:
    if at < 0 and pattern in line:
        at = round((time.monotonic() - t0) * 1000)
    tail = (tail + [line])[-20:]
rc = p.wait()
if rc:
    sys.stderr.write("".join(tail))
print(at)
sys.exit(rc)
