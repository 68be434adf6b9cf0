"""How long a recording waits before it counts: load-and-attach seconds per probe set and backend.

Each run is a fresh Recorder start()/stop() with nothing recorded in between, as `kvds ebpf record` and
`session()` do it: bcc runs clang every time; libbpf opens the cached object (compiled once, beforehand: the
compile is reported separately and never mixed into the samples). Backends alternate ABBA within each probe
set so machine load drifts over both alike; the load average before and after goes into the result.
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
    backends: tuple[str, ...]
    runs: int = 5                          # recordings per backend and probe set, ABBA order
    devices: tuple[str, ...] = ()          # a device filter, as a recording would have


@dataclass(frozen=True)
class LoadTimeSummary(StoredSummary):
    """summary.json of an `ebpf-loadtime` run."""
    OMIT_WHEN_NONE = ("libbpf_compile_s",)  # only when libbpf was measured

    backends: list[str]                    # the loaders compared
    runs: int                              # recordings per backend and probe set
    probe_sets: list[str]                  # the probe sets, each comma-separated
    devices: list[str]                     # the device filter the recordings had
    loadavg_before: list[float]            # the load average before the first recording
    loadavg_after: list[float]             # and after the last
    cpus: int | None                       # CPUs on this host
    load_attach: dict[str, dict[str, dict[str, Any]]]  # probe set -> backend -> runs_s, median_s, min_s, max_s
    order: list[str]                       # "probe set:repetition:backend" in the order they ran
    libbpf_compile_s: float | None = None  # libbpf: the object's compile time before the runs (0.0: cached)



def measure_load_times(cfg: LoadTimeConfig) -> Filed[LoadTimeSummary]:
    """{probe set: {backend: [seconds...]}} plus percentiles; one stored `ebpf-loadtime` run."""
    probe_sets, backends, runs = cfg.probe_sets, cfg.backends, cfg.runs
    devices = list(cfg.devices) or None
    prepared: dict[str, float] = {}
    if "libbpf" in backends:
        from ebpf import objects

        prepared["libbpf_compile_s"] = round(objects.build()[1], 3)  # 0.0 when set-up already compiled it
    load_before = _loadavg()
    samples: dict[str, dict[str, list[float]]] = {}
    order_all: list[str] = []
    total = len(probe_sets) * len(backends) * runs
    with progress("load+attach runs", total=total) as bar:
        for probes in probe_sets:
            key = ",".join(probes)

            def one(backend: str):
                def run(rep: int) -> float:
                    rec = Recorder(probes, devices=devices, backend=backend)
                    rec.start()
                    rec.stop()
                    if rec.backend != backend:
                        raise RuntimeError(f"asked for {backend}, recorder used {rec.backend}")
                    return float(rec.load_seconds or 0.0)
                return run

            out = stats.run_alternating({b: one(b) for b in backends}, runs,
                                        on_step=lambda r, name: bar.advance())
            samples[key] = out
            order_all += [f"{key}:{r}:{n}" for r, n in stats.alternating_order(list(backends), runs)]
    summary: dict[str, Any] = {}
    for key, per in samples.items():
        summary[key] = {}
        for backend, xs in per.items():
            arr = np.array(xs)
            summary[key][backend] = {"runs_s": [round(x, 4) for x in xs], "median_s": round(float(np.median(arr)), 4),
                                     "min_s": round(float(arr.min()), 4), "max_s": round(float(arr.max()), 4)}
    res = {"backends": list(backends), "runs": runs, "probe_sets": [",".join(p) for p in probe_sets],
           "devices": list(devices or []), "loadavg_before": load_before, "loadavg_after": _loadavg(),
           "cpus": os.cpu_count(), **prepared, "load_attach": summary, "order": order_all}
    run = ResultStore().new_run("ebpf-loadtime", {k: res[k] for k in ("backends", "runs", "probe_sets", "devices")})
    for key, per in samples.items():
        for backend, xs in per.items():
            run.write_samples(f"load_attach_s-{key.replace(',', '+')}-{backend}", np.array(xs))
    summary = LoadTimeSummary(**res)
    run.write_summary(summary.as_dict())
    return Filed(run, summary)
