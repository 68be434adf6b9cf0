"""kvds eBPF track: tracepoint-only latency histograms (block I/O by priority class, reclaim), page-fault
counts and taskstats delay accounting, usable as `kvds ebpf record` or as a context manager around a run.

    from ebpf import session
    with session(probes=("blk",), devices=["/dev/loop5"]) as rec:
        ...  # the workload
    hists = rec.results(); rec.save(run)

Kernel programs: ebpf/bpf_src/kvds.bpf.c, compiled once and cached (ebpf/objects.py), loaded through libbpf
(ebpf/libbpf_loader.py, ebpf/attach.py).

Attributes are imported lazily so `kvds --help` does not load libbpf or matplotlib.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROBES", "Recorder", "session"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ebpf import recorder as _recorder

        return getattr(_recorder, name)
    raise AttributeError(name)
