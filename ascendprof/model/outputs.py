"""The names of the files ``ascendprof analyse`` writes into its output directory: the one
registry that the output set, its manifest and the ownership checks use (engine.outdir), kept
free of heavy imports so an unchanged re-run can check its output directory without loading
Arrow or pandas. A new output file adds its name here.
"""

from __future__ import annotations

#: the names other modules read or write by name (the writers, report.readback, the page)
STEP_TRACE_FILE = "cluster_step_trace_time.csv"
COMMUNICATION_FILE = "cluster_communication.json"
MATRIX_FILE = "cluster_communication_matrix.json"
GROUPS_FILE = "communication_group.json"
OP_STATISTICS_FILE = "op_statistics.csv"
SUMMARY_FILE = "summary.json"
REPORT_FILE = "report.html"

#: the cluster files (msprof-analyze names) and ascendprof's own, in the order written
CLUSTER_FILES = (STEP_TRACE_FILE, COMMUNICATION_FILE, MATRIX_FILE, GROUPS_FILE,
                 OP_STATISTICS_FILE, "top_kernels.csv", "step_trace_check.csv",
                 "iteration_trace.csv", "verdicts.json", "problems.csv", SUMMARY_FILE)

#: files of the pipeline, memory, data preparation, expert-load and efficiency analyses
#: (analyze.registry), in the order they are written
ANALYSIS_FILES = ("pipeline.csv", "pipeline_stages.csv", "memory_summary.csv",
                  "memory_top_ops.csv", "memory_modules.csv", "data_preparation.csv",
                  "dataset_pipeline.csv", "moe_expert_load.csv", "op_efficiency.csv",
                  "op_efficiency_steps.csv", "idle_breakdown.csv", "dispatch.csv",
                  "dispatch_steps.csv", "late_arrivals.csv", "collective_bandwidth.csv",
                  "link_bandwidth.csv")

#: what to change, with evidence (analyze.advice; not written with --advice off)
ADVICE_FILES = ("advice.json", "advice.csv")

#: the page of all of them (report.html), written by the analyse flow after the others
REPORT_FILES = (REPORT_FILE,)

#: every output file besides tables/
OUTPUT_FILES = CLUSTER_FILES + ANALYSIS_FILES + ADVICE_FILES + REPORT_FILES
