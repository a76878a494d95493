"""The model's arithmetic against this CPU's peak (issue 30, item 5): "close to the limit" as a ratio.

all-MiniLM-L6-v2 is a BERT encoder: 6 layers, hidden size h = 384, feed-forward size 4h = 1,536, 12 heads
(its config.json). Per layer and token of a sequence of L tokens, multiply-accumulates (MACs): Q, K, V and the
output projection 4h², the feed-forward 2 · h · 4h = 8h², the attention scores QKᵀ and their weighting of V
2 · L · h. One MAC is 2 FLOPs. Layer norms, softmax, GELU, embeddings and pooling add well under 1 % and are
left out. So per chunk: ``2 · 6 · L · (12h² + 2Lh)`` FLOPs; at L = 209 (207 MiniLM tokens + [CLS] + [SEP])
≈ 4.8 GFLOP.

Peak = cores × GHz × FLOPs per cycle and core for the precision: fp32 with AVX-512 (two 512-bit FMA units:
2 × 16 lanes × 2) = 64; int8 with AVX-512 VNNI (``vpdpbusd``, 64 MACs per instruction, 2 ports) = 256 ops;
with AMX (AMX-INT8 1,024 MACs per cycle) = 2,048 ops, AMX-BF16 = 1,024 FLOPs (Intel optimization manual,
Sapphire Rapids). GHz: the clock /proc/cpuinfo reports (a VM shows its nominal clock; a higher turbo clock
would lower the ratio).
"""

from __future__ import annotations

import os

LAYERS = 6
HIDDEN = 384
WINDOW = 256  #: tokens the model sees at most
#: FLOPs (or int ops) per cycle and core, by precision and instruction set
PER_CYCLE = {"fp32 AVX-512 FMA": 64, "int8 AVX-512 VNNI": 256, "int8 AMX": 2048, "bf16 AMX": 1024}


def flops_per_chunk(tokens: float) -> float:
    """FLOPs of one forward pass over ``tokens`` MiniLM tokens ([CLS]/[SEP] excluded; capped at the window)."""
    length = min(tokens + 2, WINDOW)
    return 2 * LAYERS * length * (12 * HIDDEN**2 + 2 * length * HIDDEN)


def cpu_ghz() -> float:
    """The clock /proc/cpuinfo reports for the first core, GHz (2.6 if unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1]) / 1000
    except (OSError, ValueError):
        pass
    return 2.6


def peak_flops(kind: str = "fp32 AVX-512 FMA") -> float:
    """Peak FLOPs per second of this machine's cores for ``kind`` (a :data:`PER_CYCLE` key)."""
    return (os.cpu_count() or 1) * cpu_ghz() * 1e9 * PER_CYCLE[kind]


def fraction_of_peak(chunks_s: float, tokens: float, kind: str = "fp32 AVX-512 FMA") -> float:
    """Achieved FLOPs per second at ``chunks_s`` chunks of ``tokens`` tokens, as a fraction of the peak."""
    return chunks_s * flops_per_chunk(tokens) / peak_flops(kind)
