"""`kvds vm overcommit`: more latency-critical memory than the budget holds (kernel_vm/overcommit.py). Every
mechanism runs the same layout (seed + repetition) under the same budget, repetitions alternating (ABBA);
kernel_vm/overcommit_repetition.py is one repetition, kernel_vm/overcommit_summary.py the figures. Every kernel
change goes through the knob journal."""

from __future__ import annotations

import mmap
from dataclasses import asdict, dataclass, replace

from harness import doctor, environment, journal, knobs, progress, stats
from harness.errors import Unavailable, UserError
from harness.results import Filed, ResultStore
from kernel_vm import mglru, mm_intent, swap_backend
from kernel_vm.arena import check_fits
from kernel_vm.bench_run import AREA, SWAP_HEADROOM
from kernel_vm.overcommit import MECHANISMS, TIERS, Geometry
from kernel_vm.overcommit_repetition import OvercommitRep, run_once
from kernel_vm.overcommit_summary import SCHEMA, OvercommitSummary, overcommit_row


@dataclass(frozen=True)
class OvercommitConfig:
    mechanisms: str = ",".join(MECHANISMS)
    reference: str = "memcg"
    rank: str = "deadline"
    arena_mb: int = 8
    block_kb: int = 64
    critical_pct: float = 80.0          # share of the arena that is latency-critical
    pressure_pct: float = 40.0          # share that may not stay resident (more than the spillable share)
    slo_us: float = 50.0                # a block is late when its slowest page read takes longer
    reps: int = 3
    seed: int = 0
    mglru: str = "off"                  # off / on where /sys/kernel/mm/lru_gen exists, keep: leave it

    def geometry(self, rep: int = 0) -> Geometry:
        return Geometry((self.arena_mb << 20) // (self.block_kb << 10), self.block_kb << 10, mmap.PAGESIZE,
                        self.critical_pct, self.seed + rep, self.rank)


def plan(cfg: OvercommitConfig) -> list[str]:
    """UserError (exit 2) before any change."""
    names = [n.strip() for n in cfg.mechanisms.split(",")]
    if not names or len(set(names)) != len(names) or any(n not in MECHANISMS for n in names):
        raise UserError(f"--mechanisms {cfg.mechanisms!r}: each of {', '.join(MECHANISMS)} at most once")
    if cfg.reference not in names:
        raise UserError(f"--reference {cfg.reference!r} is not one of --mechanisms {cfg.mechanisms!r}")
    if (cfg.block_kb << 10) % mmap.PAGESIZE or (cfg.arena_mb << 20) % (cfg.block_kb << 10):
        raise UserError(f"--block-kb {cfg.block_kb} must be whole pages dividing --arena-mb {cfg.arena_mb}")
    if cfg.mglru not in ("off", "on", "keep"):
        raise UserError(f"--mglru must be off, on or keep, not {cfg.mglru!r}")
    if not 0 < cfg.pressure_pct < 100 or cfg.slo_us <= 0:
        raise UserError("--pressure must be in (0, 100) and --slo-us positive")
    geo = cfg.geometry()
    geo.check()
    geo.check_overcommitted(cfg.pressure_pct)
    check_fits(geo.arena_bytes)
    return names


def run(cfg: OvercommitConfig) -> Filed[OvercommitSummary]:
    names = plan(cfg)
    doctor.require("memcg", "pagemap", "swap.zram", area=AREA)
    unavailable: dict[str, str] = {}
    if "mm-intent" in names and (why := mm_intent.unavailable_reason(AREA)):
        unavailable["mm-intent"] = why
    if "memcg" in names and knobs.hierarchy_for("memory")[0] != 2:
        unavailable["memcg"] = "memory.low needs the cgroup v2 memory controller (this host has memory on v1)"
    if cfg.reference in unavailable:
        raise Unavailable(f"the reference {cfg.reference}: {unavailable[cfg.reference]}")
    running = [n for n in names if n not in unavailable]
    geo = cfg.geometry()
    results: dict[str, list[OvercommitRep]] = {n: [] for n in running}
    lru = mglru.Setting(cfg.mglru if mglru.available()[0] else "keep")
    with journal.session():
        mglru.apply(lru)  # the same LRU for every mechanism; the journal puts the host's back
        swap_backend.set_up("zram", int(geo.arena_bytes * SWAP_HEADROOM))
        filed = ResultStore().new_run("vm-overcommit", {**asdict(cfg), "unavailable": unavailable})
        order = stats.alternating_order(running, cfg.reps)
        with progress.progress("vm overcommit", total=len(order)) as bar:
            for r, name in order:
                bar.update(description=f"rep {r + 1}/{cfg.reps} {name}")
                rep = run_once(replace(geo, seed=cfg.seed + r), name, cfg.pressure_pct, int(cfg.slo_us * 1000),
                               f"o{r}-{name}")
                results[name].append(rep)
                for t, lat in enumerate(rep.latency_ns):
                    filed.write_samples(f"reaccess_ns__{name}__tier{t}__rep{r}", lat)
                bar.advance()
    ref = results[cfg.reference]
    rows = [overcommit_row(n, reps, None if n == cfg.reference else ref) for n, reps in results.items()]
    tiers = geo.block_tier()
    summary = OvercommitSummary(
        schema=SCHEMA, mechanisms=names, reference=cfg.reference, rank=cfg.rank, pressure_pct=cfg.pressure_pct,
        critical_pct=cfg.critical_pct, budget_bytes=geo.budget_bytes(cfg.pressure_pct),
        critical_bytes=geo.critical_blocks() * geo.block_bytes,
        tier_blocks=[int((tiers == t).sum()) for t in range(TIERS)], block_bytes=geo.block_bytes,
        slo_us=cfg.slo_us, reps=cfg.reps, rows=[r.as_dict() for r in rows], unavailable=unavailable,
        clock=environment.clock(), mglru=lru.name)
    filed.write_summary(summary.as_dict())
    return Filed(filed, summary)
