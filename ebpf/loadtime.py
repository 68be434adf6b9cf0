"""How long a recording waits before it counts: load-and-attach seconds per probe set and backend.

Each run is a fresh Recorder start()/stop() with nothing recorded in between, as `kvds ebpf record` and
`session()` do it: bcc runs clang every time; libbpf opens the cached object (compiled once, beforehand: the
compile is reported separately and never mixed into the samples). Backends alternate ABBA within each probe
set so machine load drifts over both alike; the load average before and after goes into the result.
"""

from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from harness import stats
from harness.progress import progress
from harness.results import ResultStore

from ebpf.recorder import Recorder


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure_load_times(probe_sets: Sequence[tuple[str, ...]], backends: Sequence[str], runs: int = 5,
                       devices: Sequence[str] | None = None) -> dict[str, Any]:
    """{probe set: {backend: [seconds...]}} plus percentiles; one stored `ebpf-loadtime` run."""
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
    run.write_summary(res)
    res["run"] = str(run.path)
    return res


def format_load_times(res: dict[str, Any]) -> str:
    lines = [f"load+attach per recording (s), {res['runs']} runs per backend, ABBA order; "
             f"load average {res['loadavg_before']} -> {res['loadavg_after']} on {res['cpus']} CPUs"]
    if "libbpf_compile_s" in res:
        c = res["libbpf_compile_s"]
        lines.append(f"  libbpf object: {'compiled now in %.2f s (first use)' % c if c else 'cached (compiled at set-up)'}")
    for key, per in res["load_attach"].items():
        for backend, s in per.items():
            lines.append(f"  {key:<20} {backend:<7} median {s['median_s']:.3f}  min {s['min_s']:.3f}  "
                         f"max {s['max_s']:.3f}  runs {s['runs_s']}")
    lines.append(f"  run: {res['run']}")
    return "\n".join(lines)
