"""`kvds qemu reclaim-bench`: the host's reading of the guest's lines (fast), bad input (fast), and one real boot
of the mm_intent debug kernel in which a memory.reclaim that takes the untagged half of the arena leaves the
latency-critical half resident (slow: it builds and boots a kernel)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from qemu_validation import reclaim_bench_run, render

KVDS = [sys.executable, "-m", "harness.cli", "qemu"]


def _round(state: str, i: int, ns: int, swapped: int = 8192, crit_swapped: int = 0, crit_present: int = 0,
           ref_ns: int | None = None) -> str:
    return (f"reclaim_bench {state} round={i} ns={ns} pgscan=9000 pgsteal=8192 swapped={swapped} "
            f"swapped_critical={crit_swapped} present_critical={crit_present}"
            + (f" ref_ns={ref_ns}" if ref_ns is not None else ""))


def _out(feature: int = 1, ranges: int = reclaim_bench_run.MAX_RANGES, rounds: int = 3, crit_swapped: int = 0) -> str:
    lines = [f"reclaim_bench feature={feature} arena_pages=8192 rounds={rounds}"]
    lines += [_round("off", i, 100_000_000 + i) for i in range(rounds)]
    for i in range(rounds):
        lines.append(_round("empty", i, 101_000_000))
        if i == 0:
            lines.append(f"reclaim_bench ranges={ranges}")
        lines.append(_round("on", i, 102_000_000))
    if feature:
        lines += [_round("critical", i, 50_000_000, swapped=4096, crit_swapped=crit_swapped, crit_present=4096)
                  for i in range(rounds)]
    return "\n".join(lines) + "\n"


def test_a_complete_boot_is_read_and_reduced() -> None:
    p = reclaim_bench_run.parse(_out())
    assert p["feature"] and p["arena_pages"] == 8192 and p["ranges"] == reclaim_bench_run.MAX_RANGES
    assert [len(p["rounds"][s]) for s in reclaim_bench_run.STATES] == [3, 3, 3, 3]
    assert reclaim_bench_run.boot_ok(p, 3, 0) is None
    f = reclaim_bench_run.boot_figures(p)
    assert f["off"]["median_ms"] == pytest.approx(100.000001)
    assert f["off"]["ns_per_stolen_page"] == pytest.approx((3 * 100_000_000 + 3) / (3 * 8192))
    assert f["critical"]["max_swapped_critical"] == 0 and f["critical"]["min_swapped_other"] == 4096


def test_incomplete_or_wrong_boots_are_refused() -> None:
    assert "on" in reclaim_bench_run.boot_ok(reclaim_bench_run.parse(_out().split("reclaim_bench on round=2")[0]), 3, 0)
    assert "held 1000" in reclaim_bench_run.boot_ok(reclaim_bench_run.parse(_out(ranges=1000)), 3, 1)
    err = reclaim_bench_run.parse("reclaim_bench error no swap and no unused zram0\n")
    assert reclaim_bench_run.boot_ok(err, 3, 1) == "no swap and no unused zram0"
    # a kernel without the series: three states, registrations failed, exit 1 is expected
    floor = reclaim_bench_run.parse(_out(feature=0, ranges=0))
    assert "critical" not in floor["rounds"] and reclaim_bench_run.boot_ok(floor, 3, 1) is None


@pytest.mark.parametrize("argv", [
    ["reclaim-bench", "--rounds", "2"], ["reclaim-bench", "--arena-mb", "1000"], ["reclaim-bench", "--reps", "0"],
    ["reclaim-bench", "--kernel", "0123", "--config", "base"], ["reclaim-bench", "--config", "kasan"],
])
def test_bad_input_is_one_line_exit_2(argv: list[str]) -> None:
    p = subprocess.run([*KVDS, *argv], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (argv, p.stdout, p.stderr)
    assert p.stderr.startswith("kvds: error:") and len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.slow
def test_critical_half_stays_resident_in_a_real_guest(tmp_path, monkeypatch) -> None:
    """One boot of the default debug kernel (mm_intent with its reclaim consumer): every round of the critical
    state takes untagged pages and no latency-critical one."""
    monkeypatch.setenv("KVDS_RESULTS_DIR", str(tmp_path))
    cfg = reclaim_bench_run.ReclaimBenchConfig(rounds=3, arena_mb=8, reps=1)
    out = reclaim_bench_run.run(cfg).summary
    assert out.ok, out.failure
    (boot,) = out.boots
    assert boot["mm_intent"]
    crit = boot["rounds"]["critical"]
    assert all(r["swapped_critical"] == 0 and r["present_critical"] == 8 * 256 // 2 for r in crit)
    assert all(r["swapped"] > 0 for r in crit)


def test_within_boot_ratio_cancels_a_per_boot_clock_rate() -> None:
    # the same 10% cost on every boot, measured by clocks running at 1x, 3x and 0.5x
    on, off = [110.0, 330.0, 55.0], [100.0, 300.0, 50.0]
    w = reclaim_bench_run.within_boot_ratio(on, off)
    assert w["value"] == pytest.approx(1.1) and w["difference"] == "higher"
    assert reclaim_bench_run._ratio(on, off)["difference"] == "not measurably different"


def test_a_guest_clock_that_outran_the_host_refuses_the_boot() -> None:
    p = reclaim_bench_run.parse(_out())
    assert "clock ran 3.00x" in reclaim_bench_run.boot_ok(p, 3, 0, guest_uptime=300.0, host_seconds=100.0)
    assert reclaim_bench_run.boot_ok(p, 3, 0, guest_uptime=90.0, host_seconds=100.0) is None


def test_the_reference_loop_normalises_each_round() -> None:
    # a round twice as slow with a reference loop twice as slow (the host was busy): the same normalised figure
    text = "\n".join([_round("off", 0, 100, ref_ns=10), _round("off", 1, 200, ref_ns=20),
                      _round("off", 2, 300, ref_ns=10), _round("empty", 0, 100)]) + "\n"
    f = reclaim_bench_run.boot_figures(reclaim_bench_run.parse(text))
    assert f["off"]["median_norm"] == pytest.approx(10.0) and f["off"]["median_ms"] == pytest.approx(200e-6)
    assert f["empty"]["median_norm"] is None      # an older program's line, without the loop


def test_kernels_are_paired_boot_with_boot_of_the_same_repetition() -> None:
    # every repetition ran 10% slower on the candidate, while the repetitions themselves differ 4x (host load):
    # pairing sees the 10%, the ratio of means cannot tell it from nothing; rep 4 lacks its reference boot
    cand = {1: 110.0, 2: 440.0, 3: 220.0, 4: 999.0, 5: 165.0}
    ref = {1: 100.0, 2: 400.0, 3: 200.0, 5: 150.0}
    p = reclaim_bench_run.paired_by_rep(cand, ref)
    assert p["pairs"] == 4 and p["pairs_higher"] == 4
    assert p["value"] == pytest.approx(1.1) and p["difference"] == "higher"
    assert reclaim_bench_run._ratio([110.0, 440.0, 220.0, 165.0], list(ref.values()))["difference"] == \
        "not measurably different"


def _boot(kernel: str, rep: int, off: float, empty: float, on: float, feature: bool) -> dict:
    fig = lambda ms: {"median_ms": ms, "median_norm": ms / 10}  # noqa: E731
    return {"rep": rep, "kernel": kernel, "ok": True, "mm_intent": feature,
            "figures": {"off": fig(off), "empty": fig(empty), "on": fig(on)}}


class _KB:
    def __init__(self, kid: str) -> None:
        self.id, self.label, self.kasan, self.info = kid, kid, False, {}


def test_verdicts_judge_ranges_on_the_series_kernel_and_off_against_the_floor() -> None:
    speed = [1.0, 1.3, 0.8, 1.1, 0.9]
    boots = [_boot("floor", r + 1, 100 * s, 100 * s, 100 * s, False) for r, s in enumerate(speed)]
    boots += [_boot("series", r + 1, 101 * s, 100 * s, 100.5 * s * (1 + (-1) ** r * 0.002), True)
              for r, s in enumerate(speed)]
    out = reclaim_bench_run.summarize([_KB("floor"), _KB("series")], boots, 9, 8)
    v = out.verdicts
    assert not any(k.startswith("floor ") for k in v)             # no ranges were held on the floor
    assert v["series on/empty cost_within_boot"]["status"] == "met"
    assert v["series/floor off paired"]["status"] == "met"        # 1.01 on every pair: inside 1 +-5%
    assert v["series/floor off paired_norm"]["status"] == "met"
    off = next(c for c in out.comparisons if c["state"] == "off")
    assert off["paired"]["value"] == pytest.approx(1.01) and off["paired"]["difference"] == "higher"
    # the same series kernel 20% slower when off: the off goal is missed, the ranges goal unaffected
    slow = [dict(b, figures={**b["figures"], "off": {"median_ms": b["figures"]["off"]["median_ms"] * 1.2,
                                                     "median_norm": b["figures"]["off"]["median_norm"] * 1.2}})
            if b["kernel"] == "series" else b for b in boots]
    v2 = reclaim_bench_run.summarize([_KB("floor"), _KB("series")], slow, 9, 8).verdicts
    assert v2["series/floor off paired"]["status"] == "missed"
    assert v2["series on/empty cost_within_boot"]["status"] == "met"


def test_warmup_rounds_are_read_but_never_compared() -> None:
    head, rest = _out().split("\n", 1)
    text = head + "\n" + "\n".join(_round("warmup", i, 900_000_000) for i in range(3)) + "\n" + rest
    p = reclaim_bench_run.parse(text)
    assert len(p["rounds"]["warmup"]) == 3 and reclaim_bench_run.boot_ok(p, 3, 0) is None
    boot = {"rep": 1, "kernel": "k", "ok": True, "mm_intent": True, "figures": reclaim_bench_run.boot_figures(p)}
    (row,) = reclaim_bench_run.summarize([_KB("k")], [boot], 3, 8).kernels
    assert "warmup" not in row["median_ms"] and row["median_ms"]["off"]["value"] == pytest.approx(100.000001)
    assert all("warmup" not in pair for pair in row["cost_within_boot"])


def test_the_summary_is_typed_and_rendered_from_its_json(capsys) -> None:
    """summary.json keeps its keys (now the dataclass's fields); the table is printed from that same dict."""
    speed = [1.0, 1.3, 0.8]
    boots = [_boot("k", r + 1, 100 * s, 100 * s, 101 * s, True) for r, s in enumerate(speed)]
    for b in boots:
        b["figures"] = {s: {**f, "max_swapped_critical": 0, "min_swapped_other": 5, "median_pgsteal": 8192,
                            "median_pgscan": 9000} for s, f in b["figures"].items()}
    out = reclaim_bench_run.summarize([_KB("k")], boots, 3, 8)
    d = out.as_dict()
    assert list(d) == ["rounds", "arena_mb", "kernels", "comparisons", "verdicts", "boots", "ok", "failure"]
    render.reclaim_bench(reclaim_bench_run.ReclaimBenchSummary.from_json(d))
    text = capsys.readouterr().out
    assert "3 boot(s) per kernel" in text and "verdict k on/empty cost_within_boot: " in text
    assert reclaim_bench_run.exit_status(out) == 0
