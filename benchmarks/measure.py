"""Run a command, print one JSON line with its wall time and peak RSS (its own process
tree's largest resident set, from getrusage of the waited children), and the end of its
output (where layoutkit's ``--timings`` table is).

    python benchmarks/measure.py -- CMD ARGS...
"""

import json
import resource
import subprocess
import sys
import time

cmd = sys.argv[sys.argv.index("--") + 1 :]
t0 = time.perf_counter()
proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "peak_rss": peak, "returncode": proc.returncode, "stderr": proc.stderr[-2000:],
                  "stdout": proc.stdout[-4000:]}))
