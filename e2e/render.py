"""`kvds e2e`'s text output, from the typed summary (harness/verbs.py)."""
from __future__ import annotations

from e2e import table
from e2e.summary import E2ePlan, E2eSummary


def e2e(s: E2eSummary) -> None:
    t = s.trace
    print(f"{t.get('path')}: {t.get('steps')} decode steps, {t.get('requests')} requests, blocks "
          f"{t.get('source_block_bytes')} B scaled to {t.get('block_bytes')} B; {t.get('priorities') or ''}")
    st = s.setup
    print(f"fast tier {st['arena_bytes'] >> 20} MiB arena in a memory cgroup limited to "
          f"{st['memcg_limit_bytes'] >> 20} MiB ({st.get('squeeze', 'one group for the run')}; zram swap "
          f"{st['swap']}); slow tier {st['device']['path']} "
          f"({st['scheduler']}); tenants: {s.tenants['stated']}, hog measured {s.tenants.get('hog_measured')}")
    print("TPOT = replayed KV stall + modelled compute and recompute; TPOT percentiles resample repetitions, the "
          "rest are t intervals over repetitions (95%)")
    cost = st.get("swap_in_cost") or {}
    if cost:
        print(f"one swap-in measured at {cost['swap_in_us']:.1f} us ({cost['major_faults']} major faults of "
              f"{cost['pages']} pages paged out{'' if cost.get('valid') else ': not swap-ins, no sim + swap-ins'})")
    print(table.text(table.HEADERS, table.factorial_rows(s.cells, s.order)))
    print(f"where the time went, measured per decode step (ms; {st.get('step_stalls', 'not recorded')}):")
    for name, c in table.in_design_order(s.cells, s.order):
        print(f"  {name}: {table.tail_text(c)}")
    print()
    print("effects, paired by repetition (mean [95% t interval])")
    print(table.text(table.EFFECT_HEADERS, table.effect_rows(s.effects)))
    print()
    print("goals (kvds's policy with intents vs the reference cell, paired by repetition)")
    for line in table.goal_lines(s.goals):
        print(f"  {line}")
    print("the squeeze per repetition (swap-ins / refaulted pages / pages reclaimed; mm_intent look-ups):")
    for name, c in table.in_design_order(s.cells, s.order):
        rows = c.get("squeeze_per_rep") or []
        reclaimed = "pgsteal" if any("pgsteal" in r for r in rows) else "pgpgout"
        line = (f"  {name}: swap-ins {table.per_rep_text(rows, 'swap_ins')}, refaults "
                f"{table.per_rep_text(rows, 'workingset_refault_anon')}, {reclaimed} {table.per_rep_text(rows, reclaimed)}")
        if any("mm_intent_lookups" in r for r in rows):
            line += (f", look-ups {table.per_rep_text(rows, 'mm_intent_lookups')}, pages kept "
                     f"{table.per_rep_text(rows, 'mm_intent_protected_pages')} / demoted "
                     f"{table.per_rep_text(rows, 'mm_intent_demoted_pages')}")
        if any("beyond_arena" in r for r in rows):
            line += f", MiB beyond the arena {table.per_rep_text(rows, 'beyond_arena', 1 / (1 << 20))}"
        if any("oom_waits" in r for r in rows):
            line += (f", faults that waited for the OOM guard's limit raise {table.per_rep_text(rows, 'oom_waits')} "
                     f"(MiB the limit rose {table.per_rep_text(rows, 'limit_raised_bytes', 1 / (1 << 20))})")
        print(line)
    if any(r.get("owner_in_group") is False for c in s.cells.values() for r in c.get("squeeze_per_rep") or []):
        print("  kvds sat outside the squeezed groups (this host can neither make it unkillable nor switch a group's "
              "OOM killer off): their reclaim did not see the replay's references nor consult mm_intent "
              "(e2e/stack.py Squeeze)")
    for w in s.warmup or []:
        print(f"  warm-up ({w['cell']}, unmeasured): swap-ins {w['swap_ins']}, refaults "
              f"{w.get('workingset_refault_anon', '-')}")
    print(f"load: start {s.load['start']}, end {s.load['end']}; {s.seconds:.0f} s")


def e2e_dry_run(p: E2ePlan) -> None:
    t = p.trace
    print(f"kvds e2e would run {len(p.order)} cell repetitions of {t['steps']} decode steps ({t['path']}, blocks "
          f"scaled {t['source_block_bytes']} -> {t['block_bytes']} B), after {p.warmup} unmeasured warm-up "
          "repetition(s) of the first cell; each repetition on a fresh memory cgroup and arena")
    if p.guest_timeout_s is not None:
        print(f"with --target guest: a {p.guest_timeout_s:.0f} s guest timeout (e2e.e2e_run.guest_seconds; "
              "--guest-timeout overrides)")
    print("order: " + ", ".join(f"{n} #{r + 1}" for r, n in p.order))
    print("sizes: " + ", ".join(f"{k} {v}" for k, v in p.sizes.items()))
    print(f"intent mapping {p.mapping['name']}:")
    for cls, knobs_ in p.mapping["classes"].items():
        if knobs_:
            print(f"  {cls}: " + ", ".join(f"{k}={v}" for k, v in knobs_.items()))
    print("madvise per intent repetition (blocks): " + "; ".join(f"{k} {v}" for k, v in p.madvise_per_rep.items()))
    print(f"tenants: {p.tenants}")
    print("commands:")
    for c in p.commands:
        tag = (f" [{c['cell']} " + (f"#{c['rep'] + 1}]" if c['rep'] >= 0 else "warm-up]")) if "cell" in c else ""
        print(f"  {c['what']}{tag}: " + " ".join(c["argv"]))
    print("nothing was set up or started (--dry-run)")
