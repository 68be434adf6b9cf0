"""`kvds ebpf load-time`: how long a recording waits before it counts, load-and-attach seconds per probe set.

Each run is a fresh Recorder start()/stop() with nothing recorded in between, as `kvds ebpf record` and
`session()` do it: libbpf opens the cached object (compiled once, beforehand: the compile is reported separately
and never mixed into the samples). Probe sets alternate ABBA so machine load drifts over all alike; the load
average before and after goes into the result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from harness import stats
from harness.progress import progress
from harness.results import Filed, ResultStore

from ebpf.recorder import Recorder
from ebpf.summary import LoadTimeSummary


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@dataclass(frozen=True)
class LoadTimeConfig:
    probe_sets: tuple[tuple[str, ...], ...]
    runs: int = 5                          # recordings per probe set, ABBA order
    devices: tuple[str, ...] = ()          # a device filter, as a recording would have


def run(cfg: LoadTimeConfig) -> Filed[LoadTimeSummary]:
    """Load-and-attach seconds of `runs` fresh recordings per probe set; one stored `ebpf-loadtime` run."""
    from ebpf import objects

    devices = list(cfg.devices) or None
    compile_s = round(objects.build()[1], 3)  # 0.0 when set-up already compiled it
    load_before = _loadavg()

    def one(probes: tuple[str, ...]):
        def recording(rep: int) -> float:
            rec = Recorder(probes, devices=devices)
            rec.start()
            rec.stop()
            return float(rec.load_seconds or 0.0)
        return recording

    keys = {",".join(p): p for p in cfg.probe_sets}
    with progress("load+attach runs", total=len(keys) * cfg.runs) as bar:
        samples = stats.run_alternating({key: one(p) for key, p in keys.items()}, cfg.runs,
                                        on_step=lambda r, name: bar.advance())
    load_attach = {}
    for key, xs in samples.items():
        arr = np.array(xs)
        load_attach[key] = {"runs_s": [round(x, 4) for x in xs], "median_s": round(float(np.median(arr)), 4),
                            "min_s": round(float(arr.min()), 4), "max_s": round(float(arr.max()), 4)}
    summary = LoadTimeSummary(runs=cfg.runs, probe_sets=list(keys), devices=list(devices or []),
                              loadavg_before=load_before, loadavg_after=_loadavg(), cpus=os.cpu_count(),
                              load_attach=load_attach,
                              order=[f"{r}:{k}" for r, k in stats.alternating_order(list(keys), cfg.runs)],
                              compile_s=compile_s)
    filed = ResultStore().new_run("ebpf-loadtime", {"runs": cfg.runs, "probe_sets": list(keys),
                                                    "devices": list(devices or [])})
    for key, xs in samples.items():
        filed.write_samples(f"load_attach_s-{key.replace(',', '+')}", np.array(xs))
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
