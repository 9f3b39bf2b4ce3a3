"""Reference figures of the Ascend chips and links the efficiency analyses compare against.

Huawei publishes per-variant figures of the Ascend 910B / 910C only in sales material that
varies between variants (910B1 … 910B4) and editions; the figures below are the public ones
found, each with its source, and are *references*, not measured limits. A figure marked
``derived`` has no published value of its own and is computed from a published one as the note
says. docs/analyses.md lists the same table.

Nothing here reads files.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ChipPeak:
    """Peak figures of one chip. ``tflops``: {data-type class: dense peak TFLOP/s (TOP/s for
    int8)}; ``hbm_gbps``: HBM bandwidth in GB/s (10^9 bytes/s); ``sources``: {figure: where it
    comes from}."""

    name: str
    tflops: dict
    hbm_gbps: float
    sources: dict


#: Ascend 910B (Atlas A2 training series). FP16/BF16 280 TFLOPS: Gitee AI compute documentation
#: "Ascend 910B … 理论峰值算力 FP16 280 TFLOPS" (https://ai.gitee.com/docs/compute/clusters_gpu/
#: ascend_gpu). HBM 1.2 TB/s: "HBM2E … 带宽高达1.2TB/s（理论值）" (https://www.oryoy.com/news/
#: 910b-suan-li-shi-duo-shao-…); other public texts give 0.77–1.6 TB/s for the variants.
#: FP32 (the cube's FP32/HF32 path) half the FP16 figure and INT8 twice it: derived from the
#: ratios Huawei published for the Ascend 910 (256 TFLOPS FP16, 512 TOPS INT8; Hot Chips 31,
#: Atlas 900 launch 2019) and the 910B texts giving FP32 at half of FP16
#: (https://jishuzhan.net/article/1872432607539499010).
ASCEND_910B = ChipPeak(
    "Ascend910B", {"fp16": 280.0, "bf16": 280.0, "fp32": 140.0, "int8": 560.0}, 1200.0,
    {"fp16/bf16": "Gitee AI docs, Ascend 910B: FP16 280 TFLOPS (ai.gitee.com/docs/compute/"
                  "clusters_gpu/ascend_gpu)",
     "fp32": "derived: half the FP16 figure (910B public texts: FP32 = FP16 / 2)",
     "int8": "derived: twice the FP16 figure (Ascend 910: 512 TOPS INT8 / 256 TFLOPS FP16)",
     "hbm": "public 910B spec texts: HBM2e 1.2 TB/s (oryoy.com; range 0.77-1.6 TB/s quoted)"})

#: Ascend 910C (Atlas A3 series: two 910B-class dies in one package, joined by SIO). FP16
#: 800 TFLOPS: "910C (800 TFLOPS FP16) … dual-chip package (910B)" (besthub.dev, Huawei Ascend
#: roadmap article, 2025). HBM: derived as twice the 910B figure (two dies, each with its HBM).
ASCEND_910C = ChipPeak(
    "Ascend910C", {"fp16": 800.0, "bf16": 800.0, "fp32": 400.0, "int8": 1600.0}, 2400.0,
    {"fp16/bf16": "besthub.dev, Huawei Ascend roadmap: 910C 800 TFLOPS FP16 (dual 910B-class "
                  "dies)",
     "fp32": "derived: half the FP16 figure", "int8": "derived: twice the FP16 figure",
     "hbm": "derived: twice the 910B figure (two dies)"})

CHIPS = {c.name: c for c in (ASCEND_910B, ASCEND_910C)}
DEFAULT_CHIP = ASCEND_910B.name

#: bytes per element of the data types kernel_details.csv / COMPUTE_TASK_INFO write
DTYPE_BYTES = {
    "BF16": 2, "FLOAT16": 2, "FP16": 2, "HALF": 2, "FLOAT": 4, "FLOAT32": 4, "FP32": 4,
    "DOUBLE": 8, "INT8": 1, "UINT8": 1, "BOOL": 1, "INT16": 2, "UINT16": 2, "INT32": 4,
    "UINT32": 4, "INT64": 8, "UINT64": 8, "HIFLOAT8": 1, "HIF8": 1, "FLOAT8_E4M3FN": 1,
    "FLOAT8_E5M2": 1, "COMPLEX64": 8, "INT4": 1,
}


def dtype_name(text) -> str:
    """Normalised data-type name: ``DT_BF16`` -> ``BF16`` (upper case, ``DT_`` dropped)."""
    t = str(text or "").strip().strip('"').upper()
    return t[3:] if t.startswith("DT_") else t


def dtype_bytes(text) -> int | None:
    """Bytes per element of a data type as the profiler names it (None when unknown)."""
    return DTYPE_BYTES.get(dtype_name(text))


def peak_class(text) -> str | None:
    """The :class:`ChipPeak` ``tflops`` key of a compute data type (None when not a cube type)."""
    t = dtype_name(text)
    if t in ("BF16",):
        return "bf16"
    if t in ("FLOAT16", "FP16", "HALF"):
        return "fp16"
    if t in ("FLOAT", "FLOAT32", "FP32"):
        return "fp32"
    if t in ("INT8", "HIFLOAT8", "HIF8", "FLOAT8_E4M3FN", "FLOAT8_E5M2"):
        return "int8"
    return None


def chip_of(transports) -> str:
    """The chip assumed for a rank from the transports that carried data (``transports``):
    Ascend910C when SIO is one (the die-to-die link that exists only in the 910C package of
    Atlas A3 systems), else :data:`DEFAULT_CHIP`."""
    return ASCEND_910C.name if any(str(t).upper() == "SIO" for t in transports or ()) \
        else DEFAULT_CHIP
