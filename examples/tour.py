"""A tour of the Python API on the shipped Qwen3 sample (4 NPUs, PP2 x DP2).

Run from the repository root:  python examples/tour.py [DIR] [OUT]
Every value printed here is what `ascendprof analyse` writes to its output files.
"""

import sys
from pathlib import Path

import ascendprof

here = Path(__file__).resolve().parent
data = Path(sys.argv[1]) if len(sys.argv) > 1 else here.parent / "fixtures" / "qwen3-4rank-pp2dp2"
out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("tour_output")

c = ascendprof.open(data)
print(c)
print("ranks:", c.ranks)

# normalised tables are Arrow tables (int64 ns times); pandas is one call away
kernels = c.table("kernels", ranks=[0]).to_pandas()
busy = kernels.groupby("accelerator_core")["dur_ns"].sum().sort_values(ascending=False) / 1e6
print("\nrank 0 device time by Accelerator Core (ms):")
print(busy.round(3).to_string())

# the step breakdown as msprof-analyze's cluster_step_trace_time.csv lays it out (us)
steps = c.step_breakdown()
print("\nstep breakdown (us):")
print(steps[["Step", "Type", "Index", "Computing", "Communication(Not Overlapped)",
             "Free"]].to_string(index=False))

# op types with the most time, cluster-wide
ops = c.op_statistics()
print("\nop statistics, first rows:")
print(ops.head(5).to_string(index=False))

print("\nverdicts:")
for v in c.verdicts():
    print(f"- [{v['severity']}] {v['message']}")

# all ranks on one timeline, written for the Perfetto UI / chrome://tracing
tl = c.timeline()
out.mkdir(parents=True, exist_ok=True)
path = c.write_timeline(tl, out / "cluster_trace.json")
print(f"\ntimeline: {tl.events.num_rows} slices, clock skew p95 "
      f"{tl.skew['raw_us'].get('p95', 0):.1f} us -> {path}")
