"""kvds.bpf.c (compiled once, loaded through libbpf.so.1) on real kernel objects: every block request on a kvds
loop device is accounted for in its class (tests/ebpf/blk_workload.assert_accounted), children are followed through
sched_process_fork, and one recording of blk, reclaim and faults together gives results() of the documented shape."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness import doctor, journal
from harness.errors import UserError
from harness.knobs import create_cgroup, create_file, loop_attach, zram_swap
from harness.paths import work_dir
from tests.ebpf.blk_workload import DEVICE_BYTES, assert_accounted, direct_io

N_READS, N_WRITES = 1500, 1000
MiB = 1 << 20


def _rt_reads_idle_writes(dev: str, n_reads: int, n_writes: int) -> None:
    errors: list[BaseException] = []
    readers = threading.Thread(target=direct_io, args=(dev, "rt/0", False, n_reads, 1, errors))
    writers = threading.Thread(target=direct_io, args=(dev, "idle", True, n_writes, 2, errors))
    readers.start(), writers.start()
    readers.join(), writers.join()
    assert not errors, errors


def _class_counts(blk: dict, dev: str) -> tuple[int, int, dict]:
    done = blk["issue_to_complete"][os.path.basename(dev)]
    rt_reads = done.get("rt", {}).get("read", {"count": 0})["count"]
    idle_writes = done.get("idle", {}).get("write", {"count": 0})["count"]
    return rt_reads, idle_writes, done


@doctor.skip_unless("ebpf.libbpf", "ebpf.probe.blk")
@pytest.mark.timeout(120)
@pytest.mark.parametrize("filtering,hook", [("device", "tp_btf"), ("pid", "tp_btf"), ("device", "tracepoint")])
def test_libbpf_class_counts_match_issued(filtering: str, hook: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """block_rq_insert/issue/complete through tp_btf (the default) and through the classic tracepoints (the
    fall-back)."""
    from ebpf.recorder import session

    monkeypatch.setenv("KVDS_EBPF_COMPLETE_HOOK", hook)
    with journal.session():
        backing = create_file(work_dir() / f"ebpf-libbpf-{os.getpid()}-{filtering}", DEVICE_BYTES, fill=b"b")
        dev = loop_attach(backing)
        pids = [os.getpid()] if filtering == "pid" else None
        with session(probes=("blk",), devices=[dev], pids=pids) as rec:
            _rt_reads_idle_writes(dev, N_READS, N_WRITES)
        full = rec.results()
    res = full["blk"]
    assert rec.backend == "libbpf" and rec.backend_detail == f"block_rq_insert/issue/complete via {hook}"
    rt_reads, idle_writes, done = _class_counts(res, dev)
    # Each request counted once: timed, or unfinished (its completion never reached the program: a classic
    # tracepoint program is not run while another BPF program runs on that CPU, recursion_misses; the kernel also
    # skips a few without counting them, see ebpf/README.md "Precision and limits").
    assert assert_accounted(full, dev, "rt", "read", N_READS) == rt_reads
    assert assert_accounted(full, dev, "idle", "write", N_WRITES) == idle_writes
    assert "read" not in done.get("idle", {}) and "write" not in done.get("rt", {})
    assert set(res["issue_to_complete"]) == {os.path.basename(dev)}


@doctor.skip_unless("ebpf.libbpf", "ebpf.probe.blk")
@pytest.mark.timeout(60)
def test_libbpf_device_filter_beyond_the_constants_uses_the_map() -> None:
    """Up to 16 filtered devices are constants in .rodata (the tests above); with more, the programs look the
    device up in blk_devs instead, and still keep exactly the filtered device's requests."""
    from ebpf import libbpf_loader, objects
    from ebpf.recorder import kernel_dev

    with journal.session():
        backing = create_file(work_dir() / f"ebpf-libbpf-{os.getpid()}-devmap", DEVICE_BYTES, fill=b"m")
        dev = loop_attach(backing)
        kdev = kernel_dev(dev)[0]
        absent = tuple((250 << 20) | i for i in range(libbpf_loader.MAX_DEVS))  # no such devices here
        assert libbpf_loader.kvds_cfg(False, True, absent + (kdev,)).ndevs == 0
        obj = libbpf_loader.LibbpfObject(objects.build()[0], ("blk",), False, True, False, devices=absent + (kdev,))
        try:
            devs = obj["blk_devs"]
            devs[devs.Key(kdev)] = devs.Leaf(1)
            _rt_reads_idle_writes(dev, 300, 0)
            hist = obj["blk_hist"].items()
            unfinished = [v for _, v in obj["blk_issued"].items() if v.cls == 1 and v.op == 0]
            acct = obj["blk_acct"].items()
        finally:
            obj.cleanup()
    assert {k.dev for k, _ in hist} == {kdev}
    reads = sum(v.value for k, v in hist if k.kind == 0 and k.op == 0 and k.cls == 1)  # issue->complete, read, rt
    assert reads + len(unfinished) == 300 and not acct, (reads, len(unfinished), acct)


@doctor.skip_unless("ebpf.libbpf", "ebpf.probe.faults")
@pytest.mark.timeout(60)
def test_libbpf_follows_children_and_reuses_the_compiled_object() -> None:
    """A process forked by a followed one is followed (sched_process_fork program); the object is compiled
    at most once: the second session finds it in the cache."""
    from ebpf import objects
    from ebpf.recorder import Recorder

    pages = 2048
    touch = f"import mmap; m = mmap.mmap(-1, {pages * 4096}, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS); " \
            f"m.madvise(15)\nfor o in range(0, {pages * 4096}, 4096): m[o] = 1"
    with journal.session():
        for attempt in range(2):
            rec = Recorder(probes=("faults",), pids=[os.getpid()])
            rec.start()
            try:
                child = subprocess.run([sys.executable, "-c", touch], check=True)
            finally:
                rec.stop()
            assert rec.backend == "libbpf"
            if attempt == 1:
                assert rec.compile_seconds == 0.0  # cached by the first session (or by set-up)
    assert objects.object_path().is_file()
    by_pid = rec.results()["faults"]["by_pid"]
    children = [p for p in by_pid if p != str(os.getpid())]
    assert children, by_pid.keys()
    assert any(by_pid[p]["user"].get("write-not-present", 0) >= pages for p in children), child


CHILD = r"""
import mmap, sys
size = int(sys.argv[1])
sys.stdin.readline()
m = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
m.madvise(15)
for off in range(0, size, 4096):
    m[off] = 1
print("done", flush=True)
sys.stdin.readline()
"""


def _record_mixed(dev: str, cg, size: int) -> tuple[dict, int, str]:
    """blk + reclaim + faults around rt reads / idle writes on `dev` and a child squeezed by a memcg limit."""
    from ebpf.recorder import Recorder

    child = subprocess.Popen([sys.executable, "-c", CHILD, str(size)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        cg.add_pid(child.pid)
        rec = Recorder(probes=("blk", "reclaim", "faults"), devices=[dev], pids=[])
        rec.start()
        try:
            rec.add_pid(os.getpid())
            rec.add_pid(child.pid)
            child.stdin.write("go\n")
            child.stdin.flush()
            _rt_reads_idle_writes(dev, 600, 400)
            assert child.stdout.readline().strip() == "done"
        finally:
            rec.stop()
    finally:
        child.kill()
        child.wait()
    return rec.results(), child.pid, rec.backend or ""


def _hist_ok(h: dict) -> bool:
    return set(h) == {"unit", "buckets", "count"} and h["unit"] == "usecs" and sum(h["buckets"]) == h["count"]


@doctor.skip_unless("ebpf.libbpf", "ebpf.probe.blk", "ebpf.probe.reclaim", "ebpf.probe.faults", "swap.zram", "memcg")
@pytest.mark.timeout(180)
def test_one_recording_of_every_probe_set_accounts_every_request() -> None:
    """blk + reclaim + faults in one object: every block request accounted for in its class, and results() of the
    documented shape (the same shape the bcc loader gave, when kvds had one)."""
    size = 96 * MiB
    with journal.session():
        zram_swap(256 * MiB)
        backing = create_file(work_dir() / f"ebpf-mixed-{os.getpid()}", DEVICE_BYTES, fill=b"p")
        dev = loop_attach(backing)
        cg = create_cgroup("ebpf-mixed", ("memory",))
        cg.set("memory", "memory.limit_in_bytes", 48 * MiB)
        res, child, used = _record_mixed(dev, cg, size)
    assert used == "libbpf"
    assert res["probes"] == ["blk", "reclaim", "faults"] and set(res["filters"]) == {"devices", "pids", "cgroups"}
    name = os.path.basename(dev)
    rt, idle, done = _class_counts(res["blk"], dev)
    assert assert_accounted(res, dev, "rt", "read", 600) == rt
    assert assert_accounted(res, dev, "idle", "write", 400) == idle
    assert set(res["missed_events"]) >= {"block/block_rq_issue", "block/block_rq_complete",
                                         "vmscan/mm_vmscan_memcg_reclaim_end", "exceptions/page_fault_user"}
    assert set(res["blk"]) == {"issue_to_complete", "insert_to_issue", "accounting", "devices"}
    assert res["blk"]["devices"][name] == f"{os.major(os.stat(dev).st_rdev)}:{os.minor(os.stat(dev).st_rdev)}"
    assert all(_hist_ok(h) for ops in done.values() for h in ops.values())
    assert {c: set(o) for c, o in done.items()} == {"rt": {"read"}, "idle": {"write"}}
    rc = res["reclaim"]
    assert set(rc) == {"latency", "by_pid", "by_cgroup"} and set(rc["latency"]) == {"direct", "memcg"}
    assert rc["latency"]["memcg"]["count"] > 0 and _hist_ok(rc["latency"]["memcg"])
    mine = rc["by_pid"][str(child)]
    assert set(mine) == {"comm", "memory_cgroup", "memcg"} and mine["memory_cgroup"].endswith(cg.name)
    assert set(mine["memcg"]) == {"count", "total_ns", "pages_reclaimed", "hist"}
    assert mine["memcg"]["count"] == mine["memcg"]["hist"]["count"] > 0
    faults = res["faults"]
    assert set(faults) == {"note", "by_pid", "totals"} and "no latency" in faults["note"]
    f = faults["by_pid"][str(child)]
    assert set(f) == {"comm", "user", "kernel", "total"} and f["comm"].startswith("python")
    assert f["user"].get("write-not-present", 0) >= size // 4096


def test_hook_choice_is_validated_and_bcc_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The block programs' hook is tp_btf or tracepoint (anything else: a one-line error); the bcc loader is
    gone, so asking for it is bad input (exit 2, no traceback)."""
    from ebpf.attach import complete_hook

    monkeypatch.setenv("KVDS_EBPF_COMPLETE_HOOK", "nope")
    with pytest.raises(UserError):
        complete_hook()
    monkeypatch.setenv("KVDS_EBPF_COMPLETE_HOOK", "tracepoint")
    assert complete_hook() == "tracepoint"
    monkeypatch.delenv("KVDS_EBPF_COMPLETE_HOOK")
    assert complete_hook() == "tp_btf"
    for argv in (["ebpf", "record", "--backend", "bcc"], ["ebpf", "load-time", "--backends", "libbpf,bcc"]):
        proc = subprocess.run([str(Path(sys.executable).parent / "kvds"), *argv], capture_output=True, text=True)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr


def test_object_key_follows_source_and_fault_format_is_checked(tmp_path: Path) -> None:
    from ebpf import objects

    src = tmp_path / "kvds.bpf.c"
    src.write_bytes(objects.SOURCE.read_bytes())
    assert objects.object_key(src) == objects.object_key()
    src.write_bytes(objects.SOURCE.read_bytes() + b"\n/* changed */\n")
    assert objects.object_key(src) != objects.object_key()
    # A tracefs whose page-fault record differs from kvds.bpf.c's declaration is refused, with the field named.
    for event in objects.FAULT_EVENTS:
        d = tmp_path / "events" / event
        d.mkdir(parents=True)
        (d / "format").write_text("\tfield:unsigned long address;\toffset:8;\tsize:8;\tsigned:0;\n"
                                  "\tfield:unsigned long ip;\toffset:16;\tsize:8;\tsigned:0;\n"
                                  "\tfield:unsigned int error_code;\toffset:24;\tsize:4;\tsigned:0;\n")
    assert "error_code" in (objects.check_fault_format(tmp_path) or "")
    for event in objects.FAULT_EVENTS:
        fmt = tmp_path / "events" / event / "format"
        fmt.write_text(fmt.read_text().replace("unsigned int error_code;\toffset:24;\tsize:4",
                                               "unsigned long error_code;\toffset:24;\tsize:8"))
    assert objects.check_fault_format(tmp_path) is None


@doctor.skip_unless("ebpf.libbpf", "ebpf.probe.blk")
def test_a_recording_keeps_the_commands_that_built_its_bpf_object(tmp_path: Path, kvds_env) -> None:
    """What ran underneath is kept: building an object (into an empty cache) stores the commands the pure function
    `objects.commands` gave, those commands really build it, and a recording files them in its meta.json
    (`--verbose` prints them)."""
    import json

    from ebpf import objects
    from tests.conftest import run_kvds

    env = {**kvds_env, "KVDS_BPF_OBJECTS": str(tmp_path / "objects")}
    r = subprocess.run([sys.executable, "-m", "ebpf.objects"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (obj,) = (tmp_path / "objects").glob("kvds.bpf-*.o")
    built = json.loads(objects.argv_path(obj).read_text())
    (dump, compile_) = built
    assert compile_["argv"][-2:] == ["-o", str(obj)] and str(objects.SOURCE) in compile_["argv"]
    incdir = Path(compile_["argv"][compile_["argv"].index("-I") + 1])
    assert built == objects.commands(objects.SOURCE, obj, incdir, Path(dump["stdout"]), bpftool=dump["argv"][0],
                                     clang=compile_["argv"][0])
    again = tmp_path / "again.o"  # the kept commands are the real ones: run again, they build the same object
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "vmlinux.h").symlink_to(dump["stdout"])
    argv = [*compile_["argv"][:-1], str(again)]
    argv[argv.index("-I") + 1] = str(inc)
    assert subprocess.run(argv, capture_output=True).returncode == 0 and again.stat().st_size > 0

    r = run_kvds(["ebpf", "record", "--probe", "blk", "--duration", "0.2", "--no-plots", "--verbose", "--json"], env)
    assert r.returncode == 0, r.stderr
    run = Path(json.loads(r.stdout)["run"])
    meta = json.loads((run / "meta.json").read_text())
    assert meta["commands"]["bpf_object"] == {"object": str(obj), "built_by": built}
    assert objects.shell_line(compile_) in r.stderr
