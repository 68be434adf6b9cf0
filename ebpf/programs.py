"""The BPF C programs (tracepoints only: this kernel has no kprobes, and fentry is refused under lockdown).

All probe sets of one recording are compiled as ONE bcc program, so clang runs once per recording. Filters are
compile-time switches: with none set, the hot paths do no filter lookups at all.
"""

from __future__ import annotations

from dataclasses import dataclass

# The codes the BPF programs store in their map keys; ebpf/recorder.py decodes them by these tables.
OPS = ("read", "write", "flush", "discard", "other")
CLASSES = ("none", "rt", "be", "idle")
BLK_KINDS = ("issue_to_complete", "insert_to_issue")
# blk_acct's `what` codes: requests the issue -> complete pairing could not time (see kvds.bpf.c, blk_acct).
BLK_ACCT = ("untimed", "overwritten", "lost")
RECLAIM_KINDS = ("direct", "memcg")
FAULT_BITS = {0: "protection", 1: "write", 4: "exec"}  # x86 page-fault error_code bits kvds keeps

COMMON = r"""
#include <uapi/linux/ptrace.h>
BPF_HASH(want_tgid, u32, u8, 65536);
BPF_HASH(want_cgid, u64, u8, 256);
struct comm_t { char c[16]; };
BPF_HASH(comms, u32, struct comm_t, 16384);

static __always_inline int wanted(void) {
#if FILTER_TASKS
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (want_tgid.lookup(&tgid))
        return 1;
    u64 cg = bpf_get_current_cgroup_id();
    if (want_cgid.lookup(&cg))
        return 1;
    return 0;
#else
    return 1;
#endif
}

static __always_inline void remember_comm(u32 tgid) {
    if (comms.lookup(&tgid))
        return;
    struct comm_t c = {};
    bpf_get_current_comm(&c.c, sizeof(c.c));
    comms.update(&tgid, &c);
}

#if FILTER_TASKS && FOLLOW_CHILDREN
/* Children of followed processes are followed too (a `-- CMD` run's shell pipeline, forked workers). */
TRACEPOINT_PROBE(sched, sched_process_fork) {
    u32 parent = bpf_get_current_pid_tgid() >> 32;
    if (!want_tgid.lookup(&parent))
        return 0;
    u32 child = args->child_pid;
    u8 one = 1;
    want_tgid.update(&child, &one);
    return 0;
}
#endif
"""

BLK = r"""
struct rq_key { u32 dev; u32 pad; u64 sector; };
struct rq_val { u64 ts; u8 cls; u8 op; u16 pad; u32 pad2; };
struct blk_hkey { u32 dev; u8 cls; u8 op; u8 kind; u8 slot; };
BPF_HASH(blk_inserted, struct rq_key, u64, 65536);
BPF_HASH(blk_issued, struct rq_key, struct rq_val, 65536);
BPF_HASH(blk_marked, struct rq_key, u8, 65536);
BPF_HASH(blk_devs, u32, u8, 64);
BPF_HASH(blk_hist, struct blk_hkey, u64, 16384);
/* What the pairing could not time (as in kvds.bpf.c): what 0 untimed completion, 1 overwritten issue, 2 lost. */
struct blk_akey { u32 dev; u8 cls; u8 op; u8 what; u8 pad; };
BPF_HASH(blk_acct, struct blk_akey, u64, 1024);

static __always_inline void blk_account(u32 dev, u8 cls, u8 op, u8 what) {
    struct blk_akey k = {.dev = dev, .cls = cls, .op = op, .what = what};
    blk_acct.increment(k);
}

/* Filtered devices are compared as constants (BLK_DEVS_MATCH) when there are few: no map lookup on the hot path,
 * where a loop device's read also fires every program for the backing disk's request. */
static __always_inline int blk_dev_ok(u32 dev) {
#if FILTER_DEVICES && defined(BLK_DEVS_MATCH)
    return BLK_DEVS_MATCH(dev);
#elif FILTER_DEVICES
    return blk_devs.lookup(&dev) != 0;
#else
    return 1;
#endif
}

/* rwbs: [F]{R|W|D|E|N}... ; F first = preflush. 0 read, 1 write, 2 flush, 3 discard, 4 other. */
static __always_inline u8 blk_op(const char *rwbs) {
    char c0 = rwbs[0], c1 = rwbs[1];
    char c = c0 == 'F' ? c1 : c0;
    if (c == 'R') return 0;
    if (c == 'W') return 1;
    if (c == 'D' || c == 'E') return 3;
    if (c0 == 'F') return 2;
    return 4;
}

static __always_inline void blk_count(u32 dev, u16 ioprio, const char *rwbs, u8 kind, u64 delta_ns) {
    struct blk_hkey k = {};
    k.dev = dev;
    k.cls = (ioprio >> 13) & 7;
    k.op = blk_op(rwbs);
    k.kind = kind;
    k.slot = bpf_log2l(delta_ns / 1000);
    blk_hist.increment(k);
}

#if FILTER_TASKS
/* The submitter's context: the request is born here for its first bio (issue may run in a kworker). */
TRACEPOINT_PROBE(block, block_getrq) {
    if (!blk_dev_ok(args->dev) || !wanted())
        return 0;
    struct rq_key k = {.dev = args->dev, .sector = args->sector};
    u8 one = 1;
    blk_marked.update(&k, &one);
    return 0;
}
#endif

static __always_inline int blk_tracked(struct rq_key *k) {
#if FILTER_TASKS
    return blk_marked.lookup(k) != 0;
#else
    return 1;
#endif
}

TRACEPOINT_PROBE(block, block_rq_insert) {
    if (!blk_dev_ok(args->dev))
        return 0;
    struct rq_key k = {.dev = args->dev, .sector = args->sector};
    if (!blk_tracked(&k))
        return 0;
    u64 ts = bpf_ktime_get_ns();
    blk_inserted.update(&k, &ts);
    return 0;
}

TRACEPOINT_PROBE(block, block_rq_issue) {
    if (!blk_dev_ok(args->dev))
        return 0;
    struct rq_key k = {.dev = args->dev, .sector = args->sector};
    if (!blk_tracked(&k))
        return 0;
    u64 ts = bpf_ktime_get_ns();
    u64 *ins = blk_inserted.lookup(&k);
    if (ins) {
        blk_count(args->dev, args->ioprio, args->rwbs, 1, ts - *ins);
        blk_inserted.delete(&k);
    }
    struct rq_val *prev = blk_issued.lookup(&k);
    if (prev)
        blk_account(args->dev, prev->cls, prev->op, 1);
    struct rq_val v = {.ts = ts, .cls = (args->ioprio >> 13) & 7, .op = blk_op(args->rwbs)};
    if (blk_issued.update(&k, &v))
        blk_account(args->dev, v.cls, v.op, 2);
    return 0;
}

TRACEPOINT_PROBE(block, block_rq_complete) {
    if (!blk_dev_ok(args->dev))
        return 0;
    struct rq_key k = {.dev = args->dev, .sector = args->sector};
    struct rq_val *v = blk_issued.lookup(&k);
    if (!v) {
        if (blk_tracked(&k))
            blk_account(args->dev, (args->ioprio >> 13) & 7, blk_op(args->rwbs), 0);
        return 0;
    }
    blk_count(args->dev, args->ioprio, args->rwbs, 0, bpf_ktime_get_ns() - v->ts);
    blk_issued.delete(&k);
#if FILTER_TASKS
    blk_marked.delete(&k);
#endif
    return 0;
}
"""

RECLAIM = r"""
struct rc_start_t { u64 ts; u32 kind; };
struct rc_hkey { u32 tgid; u8 kind; u8 slot; u16 pad; };
struct rc_skey { u32 tgid; u32 kind; };
struct rc_stat { u64 count; u64 ns; u64 reclaimed; u64 cgid; };
BPF_HASH(rc_start, u32, struct rc_start_t, 16384);
BPF_HASH(rc_hist, struct rc_hkey, u64, 16384);
BPF_HASH(rc_stats, struct rc_skey, struct rc_stat, 16384);

static __always_inline int rc_begin(u32 kind) {
    if (!wanted())
        return 0;
    u32 tid = bpf_get_current_pid_tgid();
    struct rc_start_t s = {.ts = bpf_ktime_get_ns(), .kind = kind};
    rc_start.update(&tid, &s);
    return 0;
}

static __always_inline int rc_end(u64 nr_reclaimed) {
    u64 id = bpf_get_current_pid_tgid();
    u32 tid = id, tgid = id >> 32;
    struct rc_start_t *s = rc_start.lookup(&tid);
    if (!s)
        return 0;
    u64 delta = bpf_ktime_get_ns() - s->ts;
    struct rc_hkey hk = {.tgid = tgid, .kind = s->kind, .slot = bpf_log2l(delta / 1000)};
    rc_hist.increment(hk);
    struct rc_skey sk = {.tgid = tgid, .kind = s->kind};
    struct rc_stat zero = {};
    struct rc_stat *st = rc_stats.lookup_or_try_init(&sk, &zero);
    if (st) {
        __sync_fetch_and_add(&st->count, 1);
        __sync_fetch_and_add(&st->ns, delta);
        __sync_fetch_and_add(&st->reclaimed, nr_reclaimed);
        st->cgid = bpf_get_current_cgroup_id();
    }
    remember_comm(tgid);
    rc_start.delete(&tid);
    return 0;
}

TRACEPOINT_PROBE(vmscan, mm_vmscan_direct_reclaim_begin) { return rc_begin(0); }
TRACEPOINT_PROBE(vmscan, mm_vmscan_direct_reclaim_end) { return rc_end(args->nr_reclaimed); }
TRACEPOINT_PROBE(vmscan, mm_vmscan_memcg_reclaim_begin) { return rc_begin(1); }
TRACEPOINT_PROBE(vmscan, mm_vmscan_memcg_reclaim_end) { return rc_end(args->nr_reclaimed); }
"""

FAULTS = r"""
struct fault_key { u32 tgid; u8 kind; u8 user; u16 pad; };
BPF_HASH(fault_counts, struct fault_key, u64, 65536);

static __always_inline int fault_count(unsigned long error_code, u8 user) {
    if (!wanted())
        return 0;
    u32 tgid = bpf_get_current_pid_tgid() >> 32;
    /* x86 error_code: bit 0 protection (else not-present), bit 1 write, bit 4 instruction fetch. */
    struct fault_key k = {.tgid = tgid, .kind = error_code & 0x13, .user = user};
    fault_counts.increment(k);
    remember_comm(tgid);
    return 0;
}

TRACEPOINT_PROBE(exceptions, page_fault_user) { return fault_count(args->error_code, 1); }
TRACEPOINT_PROBE(exceptions, page_fault_kernel) { return fault_count(args->error_code, 0); }
"""

KERNEL_PROBES = {"blk": BLK, "reclaim": RECLAIM, "faults": FAULTS}

TRACEPOINTS = {
    "blk": ("block/block_rq_insert", "block/block_rq_issue", "block/block_rq_complete", "block/block_getrq"),
    "reclaim": ("vmscan/mm_vmscan_direct_reclaim_begin", "vmscan/mm_vmscan_direct_reclaim_end",
                "vmscan/mm_vmscan_memcg_reclaim_begin", "vmscan/mm_vmscan_memcg_reclaim_end"),
    "faults": ("exceptions/page_fault_user", "exceptions/page_fault_kernel"),
}


MAX_CONST_DEVS = 16  # more filtered devices than this are looked up in the blk_devs map


@dataclass(frozen=True)
class ProgramSpec:
    probes: tuple[str, ...]
    filter_tasks: bool = False
    filter_devices: bool = False
    follow_children: bool = True
    devices: tuple[int, ...] = ()  # kernel dev_t (major << 20 | minor) of the device filter

    def source(self) -> str:
        defines = [
            f"#define FILTER_TASKS {int(self.filter_tasks)}",
            f"#define FILTER_DEVICES {int(self.filter_devices)}",
            f"#define FOLLOW_CHILDREN {int(self.follow_children)}",
        ]
        devs = sorted(set(self.devices))
        if self.filter_devices and 0 < len(devs) <= MAX_CONST_DEVS:
            match = " || ".join(f"(d) == {d}u" for d in devs)
            defines.append(f"#define BLK_DEVS_MATCH(d) ({match})")
        body = [KERNEL_PROBES[p] for p in self.probes if p in KERNEL_PROBES]
        return "\n".join(defines + [COMMON] + body)
