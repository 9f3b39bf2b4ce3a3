"""Memory advice: device memory allocator calls inside the step (``memory.allocator_calls``).

The caching allocator of torch_npu / MindSpore normally serves tensors from memory it already
holds; calls down to the driver (aclrtMalloc / aclrtFree / physical frees) inside the step mean
the cache was too small, fragmented or emptied, and each call blocks the host.
"""

from __future__ import annotations

from ascendprof.analyze.advice.base import finding, ms, Rule, severity_by_share
from ascendprof.analyze.advice.computation import _api_totals
from ascendprof.model import schemas as S

#: Allocator APIs and what to do about each (msprof-analyze rules/en/memory.yaml solutions).
ALLOCATOR_APIS = {
    "aclMallocMemInner": ["Set PYTORCH_NPU_ALLOC_CONF=expandable_segments:True so the cache "
                          "grows segments instead of allocating new blocks."],
    "aclrtFreePhysical": ["Watch HBM usage (npu-smi info) while training: at the limit, reduce "
                          "the (micro) batch size.",
                          "Remove torch.npu.empty_cache() from the step (find it with "
                          "with_stack=True: search empty_cache in trace_view.json)."],
    "aclrtFree": ["Watch HBM usage (npu-smi info) while training: at the limit, reduce the "
                  "(micro) batch size.",
                  "Remove torch.npu.empty_cache() from the step (find it with with_stack=True: "
                  "search empty_cache in trace_view.json)."],
}
#: Allocator calls from this much time per step are worth removing (msprof-analyze
#: rules/en/memory.yaml ``max_total_duration: 10000`` us).
ALLOCATOR_US = 10000.0


def _allocator_calls(ctx):
    rows = []
    for api in ALLOCATOR_APIS:
        got = _api_totals(ctx, api)
        if got and got[0]:
            rows.append((api, *got))
    out = []
    for api, calls, ns in rows:
        if ns < ALLOCATOR_US * 1000:
            continue
        share = ctx.share(ns)
        out.append(finding(
            RULES[0], [ctx.rank], key=f"{RULES[0].id}:{api}",
            severity=severity_by_share(share, 0.0, 10.0),
            message=(f"{calls:.0f} {api} call(s) per step take {ms(ns):.1f} ms"
                     + (f" ({share:.1f}% of the step)" if share is not None else "")
                     + "; the host blocks in each and the device idles meanwhile."),
            advice=ALLOCATOR_APIS[api],
            evidence={"api": api, "calls_per_step": round(calls, 1), "ms_per_step": ms(ns),
                      "n_steps": ctx.n_steps},
            impact_ns=ns, step_ns=ctx.step_ns))
    return out or None


RULES = [
    Rule("memory.allocator_calls", "memory", "Device memory allocator calls in the step",
         needs=((S.HOST_EVENTS, S.API_STATISTIC),),
         threshold={"us_per_step": ALLOCATOR_US},
         source="msprof-analyze rules/en/memory.yaml max_total_duration and solutions",
         check=_allocator_calls),
]
