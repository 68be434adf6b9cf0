"""How long a recording waits before it counts: load-and-attach seconds per probe set and backend.

Each run is a fresh Recorder start()/stop() with nothing recorded in between, as `kvds ebpf record` and
`session()` do it: libbpf opens the cached object (compiled once, beforehand: the compile is reported separately
and never mixed into the samples). Probe sets alternate ABBA so machine load drifts over all alike; the load
average before and after goes into the result.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness import stats
from harness.progress import progress
from harness.results import Filed, ResultStore, StoredSummary

from ebpf.recorder import Recorder


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


@dataclass(frozen=True)
class LoadTimeConfig:
    probe_sets: tuple[tuple[str, ...], ...]
    runs: int = 5                          # recordings per probe set, ABBA order
    devices: tuple[str, ...] = ()          # a device filter, as a recording would have


@dataclass(frozen=True)
class LoadTimeSummary(StoredSummary):
    """summary.json of an `ebpf-loadtime` run."""
    runs: int                              # recordings per probe set
    probe_sets: list[str]                  # the probe sets, each comma-separated
    devices: list[str]                     # the device filter the recordings had
    loadavg_before: list[float]            # the load average before the first recording
    loadavg_after: list[float]             # and after the last
    cpus: int | None                       # CPUs on this host
    load_attach: dict[str, dict[str, Any]]  # probe set -> runs_s, median_s, min_s, max_s
    order: list[str]                       # "repetition:probe set" in the order they ran
    compile_s: float                       # the object's compile time before the runs (0.0: cached)



def measure_load_times(cfg: LoadTimeConfig) -> Filed[LoadTimeSummary]:
    """Load-and-attach seconds of `runs` fresh recordings per probe set; one stored `ebpf-loadtime` run."""
    from ebpf import objects

    devices = list(cfg.devices) or None
    compile_s = round(objects.build()[1], 3)  # 0.0 when set-up already compiled it
    load_before = _loadavg()

    def one(probes: tuple[str, ...]):
        def run(rep: int) -> float:
            rec = Recorder(probes, devices=devices)
            rec.start()
            rec.stop()
            return float(rec.load_seconds or 0.0)
        return run

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
    run = ResultStore().new_run("ebpf-loadtime", {"runs": cfg.runs, "probe_sets": list(keys),
                                                  "devices": list(devices or [])})
    for key, xs in samples.items():
        run.write_samples(f"load_attach_s-{key.replace(',', '+')}", np.array(xs))
    run.write_summary(summary.as_dict())
    return Filed(run, summary)
