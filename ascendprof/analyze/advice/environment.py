"""Environment advice: the environment variables the profiler recorded (profiler_metadata.json
``ENV_VARIABLES``, spec §A.13; db META_DATA).

These rules run once for the cluster (scope ``cluster``): they see every rank's variables and
the rank-level findings, because a setting is only worth changing when the data shows the
problem it addresses (msprof-analyze suggests ACLNN_CACHE_LIMIT, HOST_CACHE_CAPACITY and
PYTORCH_NPU_ALLOC_CONF on every run where they are unset; here they need evidence).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ascendprof.analyze.advice.base import Rule, Skip, finding

DOC = "https://www.hiascend.com/document/detail/zh/canncommercial/850/maintenref/envvar/envref_07_0001.html"


@dataclass
class ClusterContext:
    """What a cluster rule sees: ``env`` rank -> {variable: value} (ranks with recorded
    variables only), ``fired`` rank -> set of finding keys of the rank-level rules."""

    env: dict
    fired: dict = field(default_factory=dict)

    def ranks_with(self, key_prefix: str) -> set:
        return {r for r, keys in self.fired.items()
                if any(k == key_prefix or k.startswith(key_prefix + ":") for k in keys)}


def _int(v: str):
    try:
        return int(str(v).strip())
    except (TypeError, ValueError):
        return None


def _group(ctx, pick) -> dict:
    """value -> ranks for the ranks where ``pick(env)`` returns a value (not None)."""
    out: dict = {}
    for r, env in sorted(ctx.env.items()):
        v = pick(env)
        if v is not None:
            out.setdefault(v, []).append(r)
    return out


def _need_env(ctx):
    if not ctx.env:
        raise Skip("no rank recorded ENV_VARIABLES")


def _launch_blocking(ctx):
    _need_env(ctx)
    g = _group(ctx, lambda e: e.get("ASCEND_LAUNCH_BLOCKING")
               if _int(e.get("ASCEND_LAUNCH_BLOCKING")) == 1 else None)
    if not g:
        return None
    ranks = [r for rs in g.values() for r in rs]
    return finding(
        RULES[0], ranks, severity="critical",
        message=("ASCEND_LAUNCH_BLOCKING=1: every operator launch waits for the operator to "
                 "finish, so host and device never overlap."),
        advice=["unset ASCEND_LAUNCH_BLOCKING (it is for debugging only)."],
        evidence={"ASCEND_LAUNCH_BLOCKING": "1", "ranks": ranks})


def _log_level(ctx):
    _need_env(ctx)
    g = _group(ctx, lambda e: e.get("ASCEND_GLOBAL_LOG_LEVEL")
               if _int(e.get("ASCEND_GLOBAL_LOG_LEVEL")) in (0, 1) else None)
    if not g:
        return None
    ranks = [r for rs in g.values() for r in rs]
    return finding(
        RULES[1], ranks, severity="warning",
        message=(f"ASCEND_GLOBAL_LOG_LEVEL={'/'.join(sorted(g))} (debug/info): CANN logs every "
                 f"call, which slows the host."),
        advice=["export ASCEND_GLOBAL_LOG_LEVEL=3 (error) for training runs."],
        evidence={"values": {v: rs for v, rs in g.items()}})


def _with_evidence(ctx, rule, fired: str, pick, severity: str, message: str, advice: list):
    """The finding of ``rule`` on the ranks where ``pick(env)`` is a value and a rank-level
    finding ``fired`` (a key prefix) shows the problem the setting addresses; None without."""
    _need_env(ctx)
    hit = ctx.ranks_with(fired)
    g = _group(ctx, pick)
    ranks = sorted(r for rs in g.values() for r in rs if r in hit)
    if not ranks:
        return None
    return finding(rule, ranks, severity=severity, message=message, advice=advice,
                   evidence={"values": {(v or "(unset)"): [r for r in rs if r in hit]
                                        for v, rs in g.items() if any(r in hit for r in rs)}})


def _alloc_conf(ctx):
    return _with_evidence(
        ctx, RULES[2], "memory.allocator_calls",
        lambda e: None if "expandable_segments:true" in
        e.get("PYTORCH_NPU_ALLOC_CONF", "").replace(" ", "").lower()
        else e.get("PYTORCH_NPU_ALLOC_CONF", ""), "warning",
        ("PYTORCH_NPU_ALLOC_CONF does not enable expandable segments on ranks where "
         "allocator calls slow the step (memory.allocator_calls)."),
        ["export PYTORCH_NPU_ALLOC_CONF=expandable_segments:True"])


ACLNN_CACHE_MIN = 10000


def _aclnn_cache(ctx):
    return _with_evidence(
        ctx, RULES[3], "schedule.device_idle:dispatch",
        lambda e: (e.get("ACLNN_CACHE_LIMIT") or "")
        if (_int(e.get("ACLNN_CACHE_LIMIT")) or 0) < ACLNN_CACHE_MIN else None, "info",
        (f"ACLNN_CACHE_LIMIT is unset or below {ACLNN_CACHE_MIN} on ranks whose step is "
         f"host-bound (schedule.device_idle): a larger cache saves rebuilding aclnn "
         f"executors."),
        ["export ACLNN_CACHE_LIMIT=100000"])


def _host_cache(ctx):
    return _with_evidence(
        ctx, RULES[4], "computation.op_compile",
        lambda e: (e.get("HOST_CACHE_CAPACITY") or "")
        if not _int(e.get("HOST_CACHE_CAPACITY")) else None, "info",
        ("HOST_CACHE_CAPACITY is unset or 0 on ranks that compile operators online "
         "(computation.op_compile): with changing shapes the host rebuilds operators."),
        ["export HOST_CACHE_CAPACITY=20 (caches the executors of the 20 most recent "
         "input shapes; costs host memory)."])


HCCL_VARS = ("HCCL_ALGO", "HCCL_RDMA_TC", "HCCL_RDMA_SL")


def _hccl(ctx):
    _need_env(ctx)
    out = []
    for var in HCCL_VARS:
        g = _group(ctx, lambda e, v=var: e.get(v) or None)
        if not g:
            continue
        ranks = [r for rs in g.values() for r in rs]
        what = ("pins the collective algorithm instead of HCCL's choice by chip, node count "
                "and size" if var == "HCCL_ALGO" else
                "sets the RoCE traffic class/priority; it must match the switch's PFC/ECN "
                "configuration")
        out.append(finding(
            RULES[5], ranks, key=f"{RULES[5].id}:{var}", severity="info",
            message=f"{var}={'/'.join(sorted(g))} {what}.",
            advice=[f"unset {var} unless a measurement showed it helps" if var == "HCCL_ALGO"
                    else f"Check {var} against the switch configuration ({DOC})."],
            evidence={"variable": var, "values": g}))
    return out or None


#: Variables whose value should be the same on every rank of one job.
CONSISTENT = ("ASCEND_LAUNCH_BLOCKING", "ASCEND_GLOBAL_LOG_LEVEL", "PYTORCH_NPU_ALLOC_CONF",
              "ACLNN_CACHE_LIMIT", "HOST_CACHE_CAPACITY", "HCCL_ALGO", "HCCL_RDMA_TC",
              "HCCL_RDMA_SL", "ASCEND_ENHANCE_ENABLE")


def _inconsistent(ctx):
    _need_env(ctx)
    if len(ctx.env) < 2:
        raise Skip("one rank only")
    diff = {}
    for var in CONSISTENT:
        if not any(var in e for e in ctx.env.values()):
            continue
        g = _group(ctx, lambda e, v=var: e.get(v, ""))  # absent = unset
        if len(g) > 1:
            diff[var] = {(v or "(unset)"): rs for v, rs in g.items()}
    if not diff:
        return None
    ranks = sorted({r for d in diff.values() for rs in d.values() for r in rs})
    return finding(
        RULES[6], ranks, severity="warning",
        message=(f"{len(diff)} environment variable(s) differ between ranks of one job: "
                 f"{', '.join(diff)}; ranks then behave differently (and the slowest sets the "
                 f"pace)."),
        advice=["Set the same values on every node (launch script / job template)."],
        evidence={"differences": diff})


RULES = [
    Rule("environment.launch_blocking", "environment", "ASCEND_LAUNCH_BLOCKING=1",
         needs=(("meta:env",),), threshold={"ASCEND_LAUNCH_BLOCKING": 1},
         source="msprof-analyze environment_variable_checker.py / environment_variable_info.yaml",
         check=_launch_blocking, scope="cluster"),
    Rule("environment.log_level", "environment", "Verbose CANN logging",
         needs=(("meta:env",),), threshold={"ASCEND_GLOBAL_LOG_LEVEL_below": 2},
         source="msprof-analyze environment_variable_info.yaml (0 debug, 1 info, 3 error is "
                "the default); the peer flags any value but 3, ascendprof debug and info",
         check=_log_level, scope="cluster"),
    Rule("environment.alloc_conf", "environment", "PYTORCH_NPU_ALLOC_CONF without expandable "
                                                  "segments",
         needs=(("meta:env",),), threshold={"requires": "memory.allocator_calls on the rank"},
         source="setting: msprof-analyze environment_variable_info.yaml and memory.yaml; the "
                "evidence requirement: ascendprof",
         check=_alloc_conf, scope="cluster"),
    Rule("environment.aclnn_cache", "environment", "ACLNN_CACHE_LIMIT on a host-bound step",
         needs=(("meta:env",),),
         threshold={"ACLNN_CACHE_LIMIT_min": ACLNN_CACHE_MIN,
                    "requires": "schedule.device_idle (dispatch) on the rank"},
         source="value: msprof-analyze environment_variable_checker.py (< 10000); the evidence "
                "requirement: ascendprof",
         check=_aclnn_cache, scope="cluster"),
    Rule("environment.host_cache", "environment", "HOST_CACHE_CAPACITY with online compilation",
         needs=(("meta:env",),), threshold={"requires": "computation.op_compile on the rank"},
         source="value: msprof-analyze environment_variable_checker.py (unset or 0); the "
                "evidence requirement: ascendprof",
         check=_host_cache, scope="cluster"),
    Rule("environment.hccl", "environment", "HCCL settings pinned",
         needs=(("meta:env",),), threshold={"set": list(HCCL_VARS)},
         source="msprof-analyze environment_variable_checker.py / environment_variable_info.yaml",
         check=_hccl, scope="cluster"),
    Rule("environment.inconsistent", "environment", "Environment differs between ranks",
         needs=(("meta:env",),), threshold={"variables": list(CONSISTENT)},
         source="ascendprof", check=_inconsistent, scope="cluster"),
]
