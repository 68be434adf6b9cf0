"""The factorial table and the effects table as rows of text cells: what `kvds e2e` prints and what the report's
first table shows (one builder, so the two never disagree). Every estimate through harness/report/fmt."""
from __future__ import annotations

from typing import Any

from harness.report import fmt

HEADERS = ["cell", "TPOT p50 (ms)", "TPOT p99 (ms)", "high-prio SLO", "goodput (tok/s)", "prefill tok recomputed",
           "slow-tier MiB", "swap-ins", "swap-ins per rep", "sim TPOT p99 (ms)", "measured / sim p99", "missing cost (>2x apart)",
           "sim + swap-ins p99 (ms)", "measured / (sim + swap-ins)",
           "sim + measured memory stalls p99 (ms)", "measured / (sim + memory stalls)",
           "calibrated sim p99 (ms)", "measured / calibrated", "measured / calibrated on means"]
EFFECT_HEADERS = ["metric", "policy alone", "mechanisms alone", "interaction", "whole stack vs reference"]
EFFECT_LABELS = {"tpot_p99_ms": "TPOT p99 (ms)", "slo_high_points": "high-prio SLO (points)",
                 "goodput_tok_s": "goodput (tok/s)"}


def missing_text(mc: dict[str, Any] | None) -> str:
    if not mc:
        return ""
    op = mc.get("largest")
    d = (mc.get("detail") or {}).get(op) or {}
    if not op:
        return "no modelled op measured"
    return (f"{op}: {d.get('measured_median_us', float('nan')):.0f} us measured vs {d.get('modelled_us', 0):.0f} "
            f"modelled, {mc['excess_us_per_step'][op] / 1e3:+.2f} ms/step; swap-ins "
            f"{mc['detail'].get('swap_ins_per_rep', 0):.0f}/rep")


def per_rep_text(rows: list[dict[str, Any]] | None, key: str, scale: float | None = None) -> str:
    """One figure of every repetition, in run order ("812/790/805"): the squeeze visible in each (`scale`: times
    this, to one decimal)."""
    def one(v: Any) -> str:
        return "-" if v is None else (f"{v * scale:.1f}" if scale is not None else str(v))
    return "/".join(one(r.get(key)) for r in rows) if rows else "-"


def in_design_order(cells: dict[str, dict[str, Any]], order: list[list[Any]]) -> list[tuple[str, dict[str, Any]]]:
    """The cells in the order the run first took them (the reference cell first), whatever order a stored summary's
    keys came back in (summary.json is written with sorted keys)."""
    first = {name: i for i, (_, name) in reversed(list(enumerate(order)))}
    return sorted(cells.items(), key=lambda kv: first.get(kv[0], len(first)))


def factorial_rows(cells: dict[str, dict[str, Any]], order: list[list[Any]] | None = None) -> list[list[str]]:
    rows = []
    for name, c in in_design_order(cells, order or []):
        rows.append([name, fmt.estimate(c.get("tpot_p50_us"), 1e-3), fmt.estimate(c.get("tpot_p99_us"), 1e-3),
                     fmt.estimate(c.get("slo_high")), fmt.estimate(c.get("goodput_tok_s")),
                     fmt.number(c.get("prefill_tokens_recomputed"), ".0f", why="no block tokens"),
                     fmt.estimate(c.get("slow_tier_bytes"), 1 / 2**20), fmt.estimate(c.get("swap_ins")),
                     per_rep_text(c.get("squeeze_per_rep"), "swap_ins"),
                     fmt.number((c.get("sim_tpot_p99_us") or float("nan")) / 1e3, ".3g"),
                     fmt.estimate(c.get("measured_to_sim_p99")), missing_text(c.get("missing_cost")),
                     fmt.number((c.get("sim_swap_in_tpot_p99_us") or float("nan")) / 1e3, ".3g",
                                why="swap-in cost not measured"),
                     fmt.estimate(c.get("measured_to_sim_swap_in_p99")),
                     fmt.number((c.get("sim_memory_tpot_p99_us") or float("nan")) / 1e3, ".3g",
                                why=(c.get("stalls") or {}).get("reason") or "stalls not measured"),
                     fmt.estimate(c.get("measured_to_sim_memory_p99")),
                     fmt.number((c.get("calibrated_sim_tpot_p99_us") or float("nan")) / 1e3, ".3g",
                                why="no op measured"),
                     fmt.estimate(c.get("measured_to_calibrated_sim_p99")),
                     fmt.estimate(c.get("measured_to_calibrated_mean_sim_p99"))])
    return rows


def tail_text(c: dict[str, Any]) -> str:
    """Where the cell's slowest steps' time went (its `stalls`, e2e/step_stalls.py), in ms per step: the steps at
    or above each repetition's TPOT p99 (their mean, and the slowest step: a few very slow steps lift that mean far
    above the p99 itself), then every step on average."""
    st = c.get("stalls") or {}
    if "at_p99_steps" not in st:
        return st.get("reason") or "not measured"
    t, m = st["at_p99_steps"], st["per_step_us"]

    def ms(v: Any) -> str:
        """A stall in ms; a figure stored as null (every step of that kind dropped as a glitch) shows as n/a."""
        return "n/a" if v is None or v != v else f"{v / 1e3:.2f}"

    def num(v: Any, spec: str) -> str:
        return "n/a" if v is None or v != v else format(v, spec)
    return (f"the {num(t.get('steps'), '.0f')} steps per repetition at or above its p99 (mean TPOT {ms(t.get('tpot'))} "
            f"ms; slowest step {ms(t.get('tpot_max'))}, mean over repetitions): reclaim {ms(t.get('reclaim'))}, "
            f"swap-in {ms(t.get('swapin'))}, block I/O wait {ms(t.get('blkio'))}, run queue {ms(t.get('cpu'))}, guard "
            f"waits {num(t.get('guard_waits'), '.1f')} x {num(st.get('guard_response_us_median'), '.0f')} us, rest "
            f"{ms(t.get('rest_us'))}; every step: reclaim {ms(m.get('reclaim'))}, swap-in {ms(m.get('swapin'))}, "
            f"block I/O {ms(m.get('blkio'))}, run queue {ms(m.get('cpu'))}, guard waits "
            f"{num(m.get('guard_waits'), '.2f')}"
            + ("" if not any((st.get("glitched_steps") or {}).values()) else
               f"; glitched counters dropped: {st['glitched_steps']}"))


def effect_rows(effects: dict[str, dict[str, Any]]) -> list[list[str]]:
    keys = [k for k in EFFECT_LABELS if k in effects] + [k for k in effects if k not in EFFECT_LABELS]
    return [[EFFECT_LABELS.get(k, k), *(fmt.estimate(effects[k].get(e)) for e in ("policy", "mechanisms",
                                                                                  "interaction", "whole_stack"))]
            for k in keys]


def goal_lines(goals: dict[str, dict[str, Any]]) -> list[str]:
    return [f"{k}: {g['line']}" for k, g in goals.items()]


def text(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]
    line = lambda r: "  ".join(str(x).ljust(w) for x, w in zip(r, widths)).rstrip()  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])
