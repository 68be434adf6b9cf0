"""The delivery track's path options (--rtt-ms, --loss-pct, --leaf) and the net guest lab kernel they need.

On a host whose kernel has netem and fq the options run there; on one without (this kind of machine: its
/proc/config.gz has neither), the bench refuses with the doctor's reason and exit 3 before it creates anything,
and `--target guest` boots the net lab kernel (qemu_validation/kernel/configs/net.config), which has them: that run is
tests/net/test_net_guest.py (slow)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import doctor
from harness.errors import UserError
from harness.knobs import qdisc as q
from net_priority import veth_lab as labmod
from net_priority.bench_run import BenchConfig
from net_priority.config import path_qdiscs
from net_priority.render import path_line
from qemu_validation import guest_target as guest_lab
from qemu_validation.kernel import build
from tests.conftest import KVDS, REPO, needs_root


def test_path_needs_the_qdiscs_it_names() -> None:
    assert path_qdiscs(BenchConfig()) == []
    assert path_qdiscs(BenchConfig(rtt_ms=0.5)) == ["netem"]
    assert path_qdiscs(BenchConfig(loss_pct=1)) == ["netem"]
    assert path_qdiscs(BenchConfig(rtt_ms=1, leaf="fq")) == ["netem", "fq"]
    assert labmod.leaf_of(BenchConfig()) is None
    assert labmod.leaf_of(BenchConfig(leaf="fq")) == q.Leaf("fq")
    assert labmod.leaf_of(BenchConfig(loss_pct=0.5)) == q.Leaf("netem", 0.5)


def test_leaf_and_netem_refuse_bad_values_before_any_netlink() -> None:
    for leaf in (q.Leaf("sfq"), q.Leaf("netem", 100.0), q.Leaf("netem", -1.0), q.Leaf("fq", 1.0)):
        with pytest.raises(UserError):
            leaf.check()
    for delay, loss in ((-1, 0), (5000, 0), (1, 100), (float("nan"), 0)):
        with pytest.raises(UserError):
            q.install_netem("kvds-net-none-p", "kvpnone", delay, loss)  # refused before the namespace is looked up
    with pytest.raises(UserError, match="not a kvds"):
        q.install_netem("someone-elses", "eth0", 1.0)


def test_dry_run_shows_the_path(kvds_env: dict[str, str]) -> None:
    res = subprocess.run([*KVDS, "net", "bench", "--rtt-ms", "1.5", "--loss-pct", "0.5", "--dry-run"], cwd=REPO,
                         env=kvds_env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert ("path: netem root on kvd0000 (the return path: requests and ACKs) delays every round trip 1.5 ms; a netem "
            "leaf under each bottleneck class drops 0.5 % of the data at random") in res.stdout
    js = subprocess.run([*KVDS, "net", "bench", "--leaf", "fq", "--dry-run", "--json"], cwd=REPO, env=kvds_env,
                        capture_output=True, text=True, timeout=60)
    cfg = json.loads(js.stdout)["summary"]["config"]
    assert (cfg["rtt_ms"], cfg["loss_pct"], cfg["leaf"]) == (0, 0, "fq")
    assert path_line(cfg, {"decode_if": "kvd0000"}) == "path: each bottleneck class queues into fq"
    assert path_line({"rate_mbit": 1000}, {}) is None  # a run from before the options: no path line


@needs_root
@doctor.skip_unless("net.netns", "net.veth", "net.qdisc.htb")
@pytest.mark.parametrize("args, kind", [(["--rtt-ms", "1"], "netem"), (["--leaf", "fq"], "fq")])
def test_a_path_the_kernel_lacks_is_refused_or_runs(kvds_env: dict[str, str], args: list[str], kind: str) -> None:
    """Exit 3 with the doctor's reason and nothing created where the qdisc is missing (this host); a short run
    whose config carries the path where it exists."""
    cap = doctor.capability(f"net.qdisc.{kind}")
    assert not cap.is_error, cap.reason
    res = subprocess.run([*KVDS, "net", "bench", *args, "--variants", "unloaded", "--reps", "1", "--duration-s",
                          "0.5", "--no-anchor", "--json"], cwd=REPO, env=kvds_env, capture_output=True, text=True,
                         timeout=300)
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "kvds-net-" not in left
    if cap.ok:
        assert res.returncode == 0, res.stderr[-1500:]
        cfg = json.loads(res.stdout)["summary"]["config"]
        assert cfg["rtt_ms"] == (1 if kind == "netem" else 0) and cfg["leaf"] == ("fq" if kind == "fq" else "pfifo")
    else:
        assert res.returncode == 3, res.stderr
        lines = [l for l in res.stderr.splitlines() if l.strip()]
        assert len(lines) == 1 and f"net.qdisc.{kind} is unavailable on this host" in lines[0], res.stderr
        assert cap.reason in lines[0]


def test_the_net_lab_kernel_is_named(tmp_path: Path) -> None:
    want, _, label = guest_lab.lab_kernel("net")
    assert label == "debian-6.12+mm_intent+net" and want.cpus == 2
    assert build.NET_FRAGMENT in want.spec.fragments and not want.spec.kasan
    assert guest_lab.lab_kernel()[2] == build.label_of(build.BuildSpec(kasan=True))
    with pytest.raises(UserError, match="no guest lab kernel 'nope'"):
        guest_lab.lab_kernel("nope")
    assert build.label_of(build.BuildSpec(fragments=(tmp_path / "x.config",))).endswith("+custom")


def test_the_net_fragment_builds_what_the_bench_needs() -> None:
    """Every option the guest bench's mechanisms need is in the fragment (the build refuses a config that lost one)."""
    from qemu_validation.kernel import kconfig_fragments

    frag = kconfig_fragments.load(build.NET_FRAGMENT)
    for opt in ("INET", "NET_NS", "VETH", "NET_SCH_HTB", "NET_SCH_TBF", "NET_SCH_NETEM", "NET_SCH_FQ",
                "TCP_CONG_BBR", "HIGH_RES_TIMERS", "IKCONFIG_PROC"):
        assert frag.get(f"CONFIG_{opt}") == "y", opt


def test_target_guest_asks_for_the_net_lab_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The track's parser names its lab kernel, the dispatcher hands it to the guest target: with an empty build
    cache the target is unavailable naming the net kernel and its build command, not the default debug kernel.
    Nothing boots (in-process, so the QEMU probe's result is the one the session already has)."""
    from harness.cli import build_parser
    from harness.errors import Unavailable
    from harness.remote import dispatch, execute

    args = build_parser().parse_args(["net", "bench", "--target", "guest", "--reps", "1"])
    assert args.guest_lab == "net"
    assert build_parser().parse_args(["vm", "bench", "--target", "guest"]).__dict__.get("guest_lab", "debug") == "debug"
    seen: list[str] = []

    class Recorder(execute.Executor):
        def __init__(self, *a: object, guest_lab: str = "debug", **kw: object) -> None:
            seen.append(guest_lab)
            raise Unavailable("recorded")

    monkeypatch.setattr(execute, "Executor", Recorder)
    monkeypatch.setenv("KVDS_RESULTS_DIR", str(tmp_path / "results"))
    with pytest.raises(Unavailable, match="recorded"):
        dispatch.bind(["net", "bench", "--target", "guest", "--reps", "1"], args)(args)
    assert seen == ["net"]
    if not (doctor.capability("qemu.tcg", "qemu").ok or doctor.capability("qemu.kvm", "qemu").ok):
        pytest.skip(doctor.capability("qemu.tcg", "qemu").reason)
    from qemu_validation.kernel import cachedirs

    # no builds, but the kernel sources already imported (importing Debian's tarball again costs a minute)
    sources = cachedirs.sources()
    sources.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("KVDS_CACHE_DIR", str(tmp_path / "empty-cache"))
    cachedirs.root().mkdir(parents=True)
    cachedirs.sources().symlink_to(sources)
    monkeypatch.delenv("KVDS_GUEST_KERNEL", raising=False)
    from harness.remote.guest import guest_runner

    with pytest.raises(Unavailable) as info:
        guest_runner("net")
    assert "its net kernel (debian-6.12+mm_intent+net)" in str(info.value)
    assert "kvds qemu build --fragment qemu_validation/kernel/configs/net.config" in str(info.value)


def test_dscp_classification_plan() -> None:
    """--classify dscp: the sockets carry their DSCP marks and no socket priority; one filter per mark into the
    class its net_priority names; a mark two mappings send to different classes, or a prioritised class without
    a mark, is refused."""
    import tomllib

    from harness.mapping import load_mapping, parse_mapping
    from net_priority.classes import DscpFilter, dscp_filters, role_sockopt, roles_of

    htb = load_mapping("net-htb")
    assert dscp_filters([htb]) == [DscpFilter(8, 10), DscpFilter(46, 16)]
    assert q.dscp_key(46) == "0x00b80000/0x00fc0000+0"  # tc: match ip dsfield 0xb8 0xfc
    cfg = BenchConfig(classify="dscp")
    roles = roles_of(htb)
    assert role_sockopt(cfg, "fetch", roles["fetch"]) == {"tos": 46 << 2}
    assert role_sockopt(BenchConfig(), "fetch", roles["fetch"])["priority"] == (1 << 16) | 16
    other = parse_mapping(tomllib.loads('name = "x"\n[classes.decode-critical]\nnet_priority = 2\ndscp = 46\n'), "x")
    with pytest.raises(UserError, match="dscp 46 goes to class 1:10 in one mapping and 1:c in another"):
        dscp_filters([htb, other])
    unmarked = parse_mapping(tomllib.loads('name = "y"\n[classes.decode-critical]\nnet_priority = 6\n'), "y")
    with pytest.raises(UserError, match="has no dscp mark"):
        role_sockopt(cfg, "fetch", roles_of(unmarked)["fetch"])
    with pytest.raises(UserError, match="--classify dscp needs --qdisc htb"):
        BenchConfig(classify="dscp", qdisc="tbf").check()
