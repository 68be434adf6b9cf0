"""The knob journal: five kinds of knob, a SIGKILL after each step, and `kvds restore` puts all back; the same for
each bench with worker processes (vm arena, io load generator, replay), killed at several points."""

from __future__ import annotations

import fcntl
import json
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness import doctor, journal, knobs
from harness.errors import KnobRefused
from tests.conftest import KVDS, REPO, SEED_TRACE, foreground_signals, journals_of, needs_root, run_kvds
from tests.core.journal_child import SYSFS_KNOB

pytestmark = [needs_root, doctor.skip_unless("loop", "swap.zram", "memcg")]


def snapshot(scratch: Path) -> dict:
    """Every knob the child may touch, restricted to the objects it creates (others may run kvds too)."""
    backing = str(scratch / "loop.img")
    loops = subprocess.run(["losetup", "-j", backing, "-n", "-O", "NAME"], capture_output=True, text=True).stdout.split()
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return {
        "sysfs": Path(SYSFS_KNOB).read_text().strip(),
        "loops": loops,
        "mounted": [m for m in mounts if m.startswith(str(scratch))],
        "files": sorted(str(p) for p in scratch.rglob("*")) if scratch.exists() else [],
    }


def child_objects(lines: list[str]) -> dict:
    facts = dict(line.split(" ", 3)[2:4] for line in lines if line.startswith("STEP"))
    return facts


def object_gone(kind: str, value: str) -> bool:
    if kind == "loop":
        return not Path(f"/sys/block/{Path(value).name}/loop").exists() or \
            "loop.img" not in Path(f"/sys/block/{Path(value).name}/loop/backing_file").read_text()
    if kind == "cgroup":
        return not Path(value).exists()
    if kind == "zram":
        return value not in Path("/proc/swaps").read_text() and not Path(f"/sys/block/{Path(value).name}").exists()
    return True


def start_child(scratch: Path, env: dict, mode: str = "--wait") -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.core.journal_child", str(scratch), mode], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=foreground_signals)


def child_at_step(scratch: Path, env: dict, step: int) -> tuple[subprocess.Popen, list[str]]:
    """The child, started and read up to its line "STEP <step>" (the lines read so far)."""
    child = start_child(scratch, env)
    lines = []
    for line in child.stdout:
        lines.append(line.strip())
        if line.startswith(f"STEP {step} "):
            break
    return child, lines


@pytest.mark.parametrize("kill_after", [1, 2, 3, 4, 5])
def test_sigkill_after_each_step_then_restore(tmp_path, kvds_env, kill_after: int) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = snapshot(scratch)
    child, lines = child_at_step(scratch, kvds_env, kill_after)
    assert len(lines) == kill_after, child.stderr.read() if child.poll() is not None else lines
    assert snapshot(scratch) != before  # something really changed
    child.send_signal(signal.SIGKILL)
    child.wait()
    res = run_kvds(["restore"], kvds_env)
    assert res.returncode == 0, res.stderr + res.stdout
    assert snapshot(scratch) == before
    for kind, value in child_objects(lines).items():
        assert object_gone(kind, value), (kind, value)
    assert journals_of(child.pid) == []


@pytest.mark.parametrize("mode, signum", [("--exit-normally", None), ("--raise", None), ("--wait", signal.SIGINT),
                                          ("--wait", signal.SIGTERM)])
def test_live_process_restores_itself(tmp_path, kvds_env, mode: str, signum) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = snapshot(scratch)
    env = dict(kvds_env)
    child = start_child(scratch, env, mode)
    lines = []
    if signum is not None:
        for line in child.stdout:
            lines.append(line.strip())
            if line.startswith("ALL"):
                break
        child.send_signal(signum)
    out, err = child.communicate(timeout=120)
    lines += out.split("\n")
    expected = {None: 0 if mode == "--exit-normally" else 1, signal.SIGINT: 130, signal.SIGTERM: 143}[signum]
    assert child.returncode == expected, err[-2000:]
    # the process itself put everything back (no `kvds restore` here) and removed its journal
    assert snapshot(scratch) == before, (lines, err)
    assert journals_of(child.pid) == []


def test_guard_refuses_root_disk_scheduler(kvds_env) -> None:
    with journal.scoped():
        with pytest.raises(KnobRefused, match="root filesystem|root disk"):
            knobs.set_scheduler("/dev/vda", "bfq")
        with pytest.raises(KnobRefused):
            knobs.write_knob("/sys/block/vda/queue/scheduler", "bfq")


def test_guard_refuses_foreign_kdamond(kvds_env) -> None:
    kd = Path("/sys/kernel/mm/damon/admin/kdamonds/0/state")
    if not kd.exists() or kd.read_text().strip() != "on":
        pytest.skip(f"kvds doctor: damon.free {doctor.capability('damon.free').status}: no foreign kdamond runs here")
    with journal.scoped():
        with pytest.raises(KnobRefused, match="not started by kvds"):
            knobs.write_knob(str(kd), "off")
        with pytest.raises(KnobRefused, match="another owner"):
            knobs.write_knob("/sys/kernel/mm/damon/admin/kdamonds/nr_kdamonds", "2")
    assert kd.read_text().strip() == "on"


def test_scheduler_change_refused_on_device_kvds_did_not_create(kvds_env) -> None:
    with journal.scoped():
        with pytest.raises(KnobRefused, match="did not create"):
            knobs.set_scheduler("/dev/loop0", "bfq")


SHARED_MOUNT_CHILD = """
import sys, time
from harness import journal, knobs
with journal.session():
    knobs.mount("tmpfs", sys.argv[1], "kvds-shared-test")
    print("MOUNTED", flush=True)
    sys.stdin.readline()
print("RESTORED", flush=True)
"""


def test_shared_mount_stays_until_last_user_restores(tmp_path, kvds_env) -> None:
    """Two kvds processes rely on one kvds mount: the first to finish must not pull it from the second."""
    target = tmp_path / "shared-mnt"
    target.mkdir()

    def start(state: str) -> subprocess.Popen:
        # Different state directories, as a test and a user's run have: the sharing must not depend on them.
        env = dict(kvds_env, KVDS_STATE_DIR=str(tmp_path / state))
        p = subprocess.Popen([sys.executable, "-c", SHARED_MOUNT_CHILD, str(target)], cwd=REPO, env=env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "MOUNTED"
        return p

    first = start("state-a")
    second = start("state-b")
    first.communicate("\n", timeout=60)
    assert knobs.is_mounted(str(target), "tmpfs"), "the first process unmounted a mount the second still uses"
    second.communicate("\n", timeout=60)
    assert not knobs.is_mounted(str(target), "tmpfs"), "the last user did not restore the mount"


SHARED_KNOB_CHILD = """
import sys
from harness import journal, knobs
with journal.session():
    knobs.sysctl("kernel.task_delayacct", 1)
    print("SET", flush=True)
    sys.stdin.readline()
"""


def test_shared_knob_restored_by_last_user_to_first_value(tmp_path, kvds_env) -> None:
    """Two runs need delay accounting: the first to finish must not switch it off under the second."""
    knob = Path("/proc/sys/kernel/task_delayacct")
    original = knob.read_text().strip()

    def start() -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", SHARED_KNOB_CHILD], cwd=REPO, env=kvds_env,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert p.stdout.readline().strip() == "SET"
        return p

    first = start()
    second = start()
    first.communicate("\n", timeout=60)
    assert knob.read_text().strip() == "1", "the first run switched delay accounting off under the second"
    second.communicate("\n", timeout=60)
    assert knob.read_text().strip() == original


# kill -9 of a bench that has worker processes, at several points of its run, then ONE `kvds restore`: the workers
# died with kvds (PR_SET_PDEATHSIG), and everything the run's journals name is gone or back. Small sizes, long
# enough runs that the kill lands mid-run; points are read from the run's own journals as it writes them.
BENCHES = {
    "vm": ["vm", "bench", "--arena-mb", "64", "--swap", "zram", "--reps", "3"],
    "io": ["io", "bench", "--mode", "baseline", "--duration", "20", "--reps", "2", "--kv-mib", "16",
           "--spill-mib", "32", "--scheduler", "kyber"],
    "replay": ["policy", "replay", "--trace", str(SEED_TRACE), "--policy", "LRU,DeadlineAware", "--reps", "200"],
}
# (bench, journal kind, how many of it are recorded, the state the last of them must be in at the kill)
# States, checked with kvds frozen (SIGSTOP) just before its SIGKILL, so the kill lands exactly there:
#   None: the journal shows the step done; "alive": that worker runs; "swapped": that worker has pages in swap
#   (squeezed into kvds's zram, charged to kvds's cgroups: what made swapoff fail when a worker survived) and waits
#   for kvds's next command (blocked reading its pipe: an arena mid-command is not the state the issue describes).
KILL_POINTS = [
    ("vm", "swapon", 1, None),        # swap on, no arena yet
    ("vm", "worker", 1, "swapped"),   # first arena squeezed: pages in zram, charged to kvds's cgroups
    ("vm", "worker", 2, "swapped"),   # second arena squeezed (the first one's scoped journal already restored)
    ("io", "loop", 1, None),          # device attached, no load generator yet
    ("io", "worker", 2, "alive"),     # ioload reader and writer running
    ("io", "worker", 4, "alive"),     # second repetition's reader and writer
    ("replay", "loop", 1, None),      # slow tier attached
    ("replay", "cg_move", 1, None),   # replaying inside its memory cgroup
]


def journal_entries(pid: int) -> list[dict]:
    """Every "do" entry of the process's journals with the facts its "done" line added (done=True once made)."""
    out = []
    for path in journals_of(pid):
        done: dict[int, dict] = {}
        todo = []
        try:
            text = path.read_text()
        except FileNotFoundError:
            continue  # a repetition's scoped journal, restored and removed just now
        for line in text.splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if obj.get("op") == "do":
                todo.append(obj)
            elif obj.get("op") == "done":
                done[obj["seq"]] = obj.get("facts", {})
        out += [{**e, "journal": path.name, "done": e["seq"] in done, "facts": done.get(e["seq"], {})} for e in todo]
    return out


def _alive(pid: int, start: float | None) -> bool:
    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE and (start is None or abs(p.create_time() - start) < 1e-3)
    except psutil.NoSuchProcess:
        return False


READ_SYSCALL = {"x86_64": 0, "aarch64": 63}[platform.machine()]


def _waits_for_command(pid: int) -> bool:
    """The worker is blocked in read(2), on its pipe from kvds (an arena between commands)."""
    try:
        return int(Path(f"/proc/{pid}/syscall").read_text().split()[0]) == READ_SYSCALL
    except (OSError, IndexError, ValueError):  # gone, or running ("running" is not a number)
        return False


def _swapped_kib(pid: int) -> int:
    """VmSwap of a process (0 once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmSwap:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def leftovers(entries: list[dict]) -> list[str]:
    """What the journal entries name that is still there: workers, swaps, loop devices, cgroups, files, knobs."""
    swaps = set(Path("/proc/swaps").read_text().split())
    out = []
    for e in entries:
        u, f = e["undo"], e["facts"]
        kind = e["kind"]
        if kind == "worker" and f.get("pid") and _alive(f["pid"], f.get("start")):
            out.append(f"worker {u.get('what')} pid {f['pid']} alive")
        elif kind == "swapon" and u["device"] in swaps:
            out.append(f"swap {u['device']} on")
        elif kind == "loop":
            held = subprocess.run(["losetup", "-j", u["backing"], "-n", "-O", "NAME"], capture_output=True,
                                  text=True).stdout.split()
            out += [f"loop {d} on {u['backing']}" for d in held]
        elif kind == "cg_mkdir" and Path(u["path"]).exists():
            out.append(f"cgroup {u['path']}")
        elif kind in ("create_file", "create_dir") and Path(u["path"]).exists():
            out.append(f"{kind} {u['path']}")
        elif kind == "file" and Path(u["path"]).exists() and knobs.read_knob(u["path"]) != u["old"]:
            out.append(f"{u['path']} = {knobs.read_knob(u['path'])}, was {u['old']}")
        elif kind == "mount" and Path(u.get("target", "")).is_mount():
            out.append(f"mount {u['target']}")
    return out


NEEDS = {"vm": ("pagemap",), "io": ("ioprio", "blk.schedulers", "io.ioload"), "replay": ("blk.schedulers",)}


@pytest.mark.parametrize("bench, kind, count, state",
                         [pytest.param(*p, id=f"{p[0]}-{p[1]}{p[2]}", marks=doctor.skip_unless(*NEEDS[p[0]]))
                          for p in KILL_POINTS])
def test_sigkill_of_a_bench_with_workers_then_one_restore(tmp_path, kvds_env, bench: str, kind: str, count: int,
                                                          state: str | None) -> None:
    Path(kvds_env["KVDS_WORK_DIR"]).mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([*KVDS, *BENCHES[bench]], cwd=REPO, env=kvds_env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    seen: dict[tuple, dict] = {}  # every entry ever seen: a repetition's scoped journal goes once it is restored

    def watch() -> None:
        for e in journal_entries(proc.pid):
            seen[(e["journal"], e["seq"])] = e

    def at_point() -> bool:
        """The kill point: the count-th `kind` entry is done (journals are named by creation time) and, for a
        worker, the process it names is in `state`."""
        watch()
        done = sorted((e for e in seen.values() if e["kind"] == kind and e["done"]),
                      key=lambda e: (e["journal"], e["seq"]))
        if len(done) < count:
            return False
        if state is None:
            return True
        f = done[count - 1]["facts"]
        return _alive(f["pid"], f.get("start")) and (state != "swapped" or _swapped_kib(f["pid"]) > 0)

    def settles() -> bool:
        """With kvds frozen, a "swapped" worker finishes the command it has and then waits for the next one."""
        if state != "swapped":
            return True
        f = sorted((e for e in seen.values() if e["kind"] == kind and e["done"]),
                   key=lambda e: (e["journal"], e["seq"]))[count - 1]["facts"]
        until = time.monotonic() + 60
        while time.monotonic() < until and _alive(f["pid"], f.get("start")) and not _waits_for_command(f["pid"]):
            time.sleep(0.01)
        return _waits_for_command(f["pid"]) and at_point()

    held = []
    try:
        # a liveness bound, not a timing: the replay first simulates, and on a fresh machine that includes numba's
        # cold compile (about 60 CPU seconds; past 120 s wall once beside a kernel build and guests)
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None, f"{bench} ended before the kill point: {proc.stderr.read()[-2000:]}"
            assert time.monotonic() < deadline, f"{bench} did not reach {kind} {count} {state or ''} in 300 s"
            if at_point():
                proc.send_signal(signal.SIGSTOP)  # frozen: the point cannot pass while it is checked again
                if at_point() and settles():
                    break
                proc.send_signal(signal.SIGCONT)
            time.sleep(0.02)
        # Lock the frozen kvds's journals as a restore does (journal.restore_file): another `kvds restore` on this
        # machine (another test session restoring orphans) waits, so no one but the kernel ends its workers
        # before they are looked at below.
        for path in journals_of(proc.pid):
            held.append(open(path, "a"))
            fcntl.flock(held[-1].fileno(), fcntl.LOCK_EX)
    finally:
        proc.kill()  # kvds alone, as `kill -9 <pid>` would: its workers must follow by themselves
        proc.wait()
    try:
        watch()  # kvds is dead: its journals are complete (a worker forked after the last look is named too)
        entries = list(seen.values())
        workers = [e["facts"] for e in entries if e["kind"] == "worker" and e["facts"].get("pid")]
        assert kind != "worker" or len(workers) >= count, entries
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w["pid"], w.get("start")) for w in workers):
            time.sleep(0.05)
        assert [w for w in workers if _alive(w["pid"], w.get("start"))] == [], "workers outlived their kvds process"
    finally:
        for fh in held:
            fh.close()  # releases the lock
    res = run_kvds(["restore"], kvds_env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert leftovers(entries) == [], res.stdout
    assert journals_of(proc.pid) == []


SURVIVOR_CHILD = """
import mmap, os, signal, sys, time
from harness import journal, knobs
from harness.knobs import workers

workers.die_with_parent = lambda parent: None  # a worker that outlives kvds (spawned from a thread that ended, ...)


def hold(n):
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    page = os.urandom(4096)  # not a same-filled page: zram must really store it
    for off in range(0, n, 4096):
        m[off:off + 4096] = page
    while True:
        signal.pause()


with journal.session():
    dev = knobs.zram_swap(128 << 20)
    with journal.scoped():
        cg = knobs.create_cgroup("survivor", ("memory",))
        cg.add_pid(os.getpid())  # the worker is forked inside the group: its pages are charged there
        limit = "memory.limit_in_bytes" if cg.version("memory") == 1 else "memory.max"
        cg.set("memory", limit, 256 << 20)
        usage_file = "memory.usage_in_bytes" if cg.version("memory") == 1 else "memory.current"
        base = int(cg.get("memory", usage_file))
        proc = workers.fork(hold, (96 << 20,), "memory holder")
        deadline = time.monotonic() + 60
        while int(cg.get("memory", usage_file)) < base + (94 << 20) and time.monotonic() < deadline:
            time.sleep(0.05)
        cg.set("memory", limit, int(cg.get("memory", usage_file)) - (48 << 20))  # squeeze: pages go to zram
        print("READY", dev, proc.pid, cg.path("memory"), flush=True)
        time.sleep(3600)
"""


def test_one_restore_ends_a_surviving_worker_before_swapoff(tmp_path, kvds_env) -> None:
    """The issue's failure without PR_SET_PDEATHSIG to hide it: kvds killed, its worker still alive in a squeezed
    memory cgroup with pages in kvds's zram swap. One `kvds restore` must end the worker before swapoff (which
    would otherwise have to fault its pages back into a group at its limit: ENOMEM) and leave nothing behind."""
    child = subprocess.Popen([sys.executable, "-c", SURVIVOR_CHILD], cwd=REPO, env=kvds_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        line = child.stdout.readline().split()
        assert line and line[0] == "READY", child.stderr.read() if child.poll() is not None else line
        _, dev, worker_pid, cg_dir = line
        swapped = {s.split()[0]: int(s.split()[3]) for s in Path("/proc/swaps").read_text().splitlines()[1:]}
        assert swapped.get(dev, 0) > 0, "the squeeze put nothing in zram"
    finally:
        child.kill()
        child.wait()
    worker = psutil.Process(int(worker_pid))
    assert worker.is_running() and worker.status() != psutil.STATUS_ZOMBIE, "the worker should outlive its parent here"
    res = run_kvds(["restore"], kvds_env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not _alive(int(worker_pid), None)
    assert dev not in Path("/proc/swaps").read_text()
    assert not Path(cg_dir).exists()
    assert journals_of(child.pid) == []


BARE_RESTORE = """\
import sys
from pathlib import Path
from harness import journal
assert not [m for m in sys.modules if m.startswith("harness.knobs")], "harness.journal imported a knob module"
reports = [journal.restore_file(Path(p)) for p in sys.argv[1:]]
assert not any(r.failed for r in reports), [r.failed for r in reports]
for p in sys.argv[1:]:
    Path(p).unlink()
print(sorted(m for m in sys.modules if m.startswith("harness.knobs.")))
"""


def test_a_process_that_imported_only_the_journal_restores_a_killed_kvds(tmp_path, kvds_env) -> None:
    """The journal imports no knob module (no journal <-> knobs cycle): each entry names the module of its undo,
    which a restoring process imports."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    before = snapshot(scratch)
    child, _ = child_at_step(scratch, kvds_env, 3)
    assert snapshot(scratch) != before
    child.send_signal(signal.SIGKILL)
    child.wait()
    paths = journals_of(child.pid)
    assert paths
    r = subprocess.run([sys.executable, "-c", BARE_RESTORE, *map(str, paths)], cwd=REPO, env=kvds_env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "harness.knobs.loop" in r.stdout and "harness.knobs.mounts" in r.stdout, r.stdout
    assert snapshot(scratch) == before
