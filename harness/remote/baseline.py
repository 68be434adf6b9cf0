"""`kvds remote baseline`: a short per-host reference measurement, so hosts are compared before their
experiment results are.

Two latencies a KV cache lives on, measured in alternating batches for --duration seconds: a 4 KiB O_DIRECT
pread at a random offset of a scratch file in the work directory (the storage a spilled block comes back
from; fio-like: psync, QD1, 4 KiB, random, direct=1, on the work directory's filesystem), and the first touch
of a fresh private anonymous page (the page-fault + zeroing cost of a newly allocated block). The scratch file
is created through the journal, so a run killed halfway leaves a journal that `kvds restore` clears.
"""

from __future__ import annotations

import mmap
import os
import secrets
import time

import numpy as np

from harness import stats
from harness.errors import Unavailable
from harness.knobs import create_dir, create_file
from harness.paths import work_dir
from harness.progress import progress
from harness.results import ResultStore, Run

BLOCK = 4096
BATCH = 256


def _device_of(path: str) -> str:
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    try:
        for line in open("/proc/self/mountinfo"):
            left, _, right = line.partition(" - ")
            lf, rf = left.split(), right.split()
            if lf[2] == dev and len(rf) >= 2:
                return f"{rf[1]} ({rf[0]}, {dev}, mounted on {lf[4]})"
    except OSError:
        pass
    return dev


def _read_batch(fd: int, buf: mmap.mmap, offsets: np.ndarray, out: list[int]) -> None:
    clock = time.perf_counter_ns
    for off in offsets.tolist():
        t0 = clock()
        os.preadv(fd, [buf], off)
        out.append(clock() - t0)


def _touch_batch(out: list[int]) -> None:
    m = mmap.mmap(-1, BATCH * BLOCK, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    clock = time.perf_counter_ns
    try:
        for i in range(0, BATCH * BLOCK, BLOCK):
            t0 = clock()
            m[i] = 1
            out.append(clock() - t0)
    finally:
        m.close()


def _describe(ns: np.ndarray) -> dict[str, object]:
    est = stats.bootstrap_percentiles(ns / 1000.0, (50.0, 90.0, 99.0), n_boot=200)
    return {"count": int(ns.size), "p50_us": est[50.0].value, "p90_us": est[90.0].value, "p99_us": est[99.0].value,
            "p99_ci_us": [est[99.0].lo, est[99.0].hi]}


def run_baseline(duration_s: float, file_mib: int, seed: int = 0) -> Run:
    base = work_dir()
    base.mkdir(parents=True, exist_ok=True)
    config = {"duration_s": duration_s, "file_mib": file_mib, "block_bytes": BLOCK, "batch": BATCH, "seed": seed,
              "io": "psync pread, QD1, random offsets, O_DIRECT", "work_dir": str(base),
              "device": _device_of(str(base))}
    run = ResultStore().new_run("host-baseline", config)  # first: a run cut short still leaves its record
    scratch = create_dir(base / f"baseline-{os.getpid()}-{secrets.token_hex(3)}")
    data = create_file(scratch / "data", file_mib << 20, fill=b"kvds-baseline-block.")
    try:
        fd = os.open(data, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        raise Unavailable(f"O_DIRECT reads on {base} fail ({exc.strerror}); set KVDS_WORK_DIR to a disk filesystem")
    buf = mmap.mmap(-1, BLOCK)
    rng = np.random.default_rng(seed)
    reads: list[int] = []
    touches: list[int] = []
    nblocks = (file_mib << 20) // BLOCK
    t_end = time.monotonic() + duration_s
    try:
        with progress("host baseline", total=duration_s) as bar:
            t_prev = time.monotonic()
            while time.monotonic() < t_end:
                _read_batch(fd, buf, rng.integers(0, nblocks, BATCH) * BLOCK, reads)
                _touch_batch(touches)
                now = time.monotonic()
                bar.advance(now - t_prev)
                t_prev = now
    finally:
        os.close(fd)
        buf.close()
    r = np.asarray(reads, dtype=np.int64)
    t = np.asarray(touches, dtype=np.int64)
    run.write_samples("pread_direct_4k_ns", r)
    run.write_samples("anon_first_touch_ns", t)
    run.write_summary({"pread_direct_4k": _describe(r), "anon_first_touch": _describe(t)})
    return run
