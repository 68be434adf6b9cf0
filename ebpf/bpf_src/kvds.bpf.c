// SPDX-License-Identifier: GPL-2.0
/* kvds tracepoint programs (block I/O, reclaim, page faults), the only source of them: compiled ONCE by clang
 * against the running kernel's BTF (vmlinux.h, ebpf/objects.py) and loaded through libbpf (ebpf/attach.py). The
 * map key/value structs have one Python twin each, in ebpf/bpf_structs.py (tests/ebpf/test_ebpf_structs.py checks
 * them against this object's BTF). Filters and the choice of probe sets are run-time settings, not compile-time ones:
 *   - `cfg` lives in .rodata and is written before load, so the verifier sees constants and prunes the filter
 *     branches a session does not use (the hot path does no filter lookups when nothing is filtered);
 *   - the loader disables autoload of the programs, and autocreate of the maps, of probe sets not chosen.
 * Tracepoint contexts come from vmlinux.h (trace_event_raw_*, CO-RE relocated against the running kernel);
 * block_rq_complete is preferably a tp_btf program reading struct request with CO-RE (see there); the
 * exceptions are the x86 page-fault events, whose record type is not in the kernel's BTF: kvds_page_fault below
 * copies the tracefs format, and ebpf/objects.py checks that format before loading.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "kvds_helpers.h"

char LICENSE[] SEC("license") = "GPL";

/* Up to KVDS_MAX_DEVS filtered devices are compared as constants (no map lookup on the hot path, which matters:
 * a loop device's read also fires every block program for the backing disk's request); with more, ndevs is 0
 * and the blk_devs map is consulted. Keep in step with KvdsCfg in ebpf/bpf_structs.py. */
#define KVDS_MAX_DEVS 16
struct kvds_cfg {
    __u32 filter_tasks;
    __u32 filter_devices;
    __u32 ndevs;
    __u32 devs[KVDS_MAX_DEVS];
};
const volatile struct kvds_cfg cfg = {};

#define HASH(name, k, v, n) \
    struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, n); __type(key, k); __type(value, v); } name SEC(".maps")

/* ---- common: task filter, comm cache, fork following ---------------------------------------------------- */
struct comm_t { char c[16]; };
HASH(want_tgid, __u32, __u8, 65536);
HASH(want_cgid, __u64, __u8, 256);
HASH(comms, __u32, struct comm_t, 16384);

static __always_inline int wanted(void) {
    if (!cfg.filter_tasks)
        return 1;
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    if (bpf_map_lookup_elem(&want_tgid, &tgid))
        return 1;
    __u64 cg = bpf_get_current_cgroup_id();
    if (bpf_map_lookup_elem(&want_cgid, &cg))
        return 1;
    return 0;
}

static __always_inline void remember_comm(__u32 tgid) {
    if (bpf_map_lookup_elem(&comms, &tgid))
        return;
    struct comm_t c = {};
    bpf_get_current_comm(&c.c, sizeof(c.c));
    bpf_map_update_elem(&comms, &tgid, &c, BPF_ANY);
}

/* Children of followed processes are followed too; loaded only when tasks are filtered and children followed. */
SEC("tracepoint/sched/sched_process_fork")
int follow_fork(struct trace_event_raw_sched_process_fork *args) {
    __u32 parent = bpf_get_current_pid_tgid() >> 32;
    if (!bpf_map_lookup_elem(&want_tgid, &parent))
        return 0;
    __u32 child = args->child_pid;
    __u8 one = 1;
    bpf_map_update_elem(&want_tgid, &child, &one, BPF_ANY);
    return 0;
}

/* ---- blk ------------------------------------------------------------------------------------------------- */
struct rq_key { __u32 dev; __u32 pad; __u64 sector; };
struct rq_val { __u64 ts; __u8 cls; __u8 op; __u16 pad; __u32 pad2; };  /* issue time, and whose request */
struct blk_hkey { __u32 dev; __u8 cls; __u8 op; __u8 kind; __u8 slot; };
HASH(blk_inserted, struct rq_key, __u64, 65536);
HASH(blk_issued, struct rq_key, struct rq_val, 65536);
HASH(blk_marked, struct rq_key, __u8, 65536);
HASH(blk_devs, __u32, __u8, 64);
HASH(blk_hist, struct blk_hkey, __u64, 16384);
/* What the issue -> complete pairing could not time, per device, class and op, so a recording accounts for every
 * request (ebpf/recorder.py adds the entries still in blk_issued at stop: issued, never seen completing):
 *   issued = timed + unfinished + overwritten + lost,   completed (as the programs saw it) = timed + untimed. */
struct blk_akey { __u32 dev; __u8 cls; __u8 op; __u8 what; __u8 pad; };
HASH(blk_acct, struct blk_akey, __u64, 1024);
#define BLK_UNTIMED 0      /* a completion that found no issue entry (issued before the recording, or overwritten) */
#define BLK_OVERWRITTEN 1  /* an issue entry replaced by a later issue of the same key before its completion */
#define BLK_LOST 2         /* an issue entry the map refused to store (full, or busy) */

static __always_inline int blk_dev_ok(__u32 dev) {
    if (!cfg.filter_devices)
        return 1;
    if (cfg.ndevs == 0)
        return bpf_map_lookup_elem(&blk_devs, &dev) != 0;
#pragma unroll
    for (int i = 0; i < KVDS_MAX_DEVS; i++) {
        if (i >= cfg.ndevs)  /* a constant for the verifier: the loop ends at ndevs */
            return 0;
        if (cfg.devs[i] == dev)
            return 1;
    }
    return 0;
}

/* rwbs: [F]{R|W|D|E|N}... ; F first = preflush. 0 read, 1 write, 2 flush, 3 discard, 4 other. */
static __always_inline __u8 blk_op(char c0, char c1) {
    char c = c0 == 'F' ? c1 : c0;
    if (c == 'R') return 0;
    if (c == 'W') return 1;
    if (c == 'D' || c == 'E') return 3;
    if (c0 == 'F') return 2;
    return 4;
}

static __always_inline void blk_count(__u32 dev, __u16 ioprio, __u8 op, __u8 kind, __u64 delta_ns) {
    struct blk_hkey k = {};
    k.dev = dev;
    k.cls = (ioprio >> 13) & 7;
    k.op = op;
    k.kind = kind;
    k.slot = kvds_log2l(delta_ns / 1000);
    kvds_increment(&blk_hist, &k);
}

static __always_inline void blk_account(__u32 dev, __u8 cls, __u8 op, __u8 what) {
    struct blk_akey k = {.dev = dev, .cls = cls, .op = op, .what = what};
    kvds_increment(&blk_acct, &k);
}

static __always_inline int blk_tracked(struct rq_key *k) {
    if (!cfg.filter_tasks)
        return 1;
    return bpf_map_lookup_elem(&blk_marked, k) != 0;
}

/* The submitter's context: the request is born here for its first bio (issue may run in a kworker). */
SEC("tracepoint/block/block_getrq")
int blk_getrq(struct trace_event_raw_block_bio *args) {
    __u32 dev = args->dev;
    if (!blk_dev_ok(dev) || !wanted())
        return 0;
    struct rq_key k = {.dev = dev, .sector = args->sector};
    __u8 one = 1;
    bpf_map_update_elem(&blk_marked, &k, &one, BPF_ANY);
    return 0;
}

/* The three block events, each reached two ways that give the same counts; the loader loads one set
 * (ebpf/libbpf_loader.py, BLK_HOOKS):
 *  - tp_btf (default): raw tracepoints with BTF arguments, reading struct request directly (BTF pointer loads, no
 *    helper calls) the way the tracepoints' TP_fast_assign does: dev = disk_devt(rq->q->disk),
 *    sector = blk_rq_pos(rq), ioprio = req_get_ioprio(rq), op from cmd_flags as blk_fill_rwbs + blk_op() would
 *    classify it. The kernel neither formats a perf record for them nor skips them when another BPF program is
 *    running on that CPU (only recursion of the same program is refused).
 *  - tracepoint: classic tracepoints, the fall-back for a kernel whose BTF lacks those fields. The
 *    kernel fills a perf record first (rwbs string and all), and does not run the program when another
 *    kprobe/tracepoint BPF program is already running on that CPU (bpf_prog_active): a completion interrupt
 *    arriving during our block_rq_issue program is lost (recursion_misses; 0-28 of 1500 reads on this loaded VM).
 * The device filter comes first in each (the callers below): the backing disk's request of a loop device's read
 * costs a comparison, nothing more. */
static __always_inline void blk_inserted_at(__u32 dev, __u64 sector) {
    struct rq_key k = {.dev = dev, .sector = sector};
    if (!blk_tracked(&k))
        return;
    __u64 ts = bpf_ktime_get_ns();
    bpf_map_update_elem(&blk_inserted, &k, &ts, BPF_ANY);
}

static __always_inline void blk_issued_at(__u32 dev, __u64 sector, __u16 ioprio, __u8 op) {
    struct rq_key k = {.dev = dev, .sector = sector};
    if (!blk_tracked(&k))
        return;
    __u64 ts = bpf_ktime_get_ns();
    __u64 *ins = bpf_map_lookup_elem(&blk_inserted, &k);
    if (ins) {
        blk_count(dev, ioprio, op, 1, ts - *ins);
        bpf_map_delete_elem(&blk_inserted, &k);
    }
    struct rq_val *prev = bpf_map_lookup_elem(&blk_issued, &k);
    if (prev)  /* counted as the earlier request's: it will never be timed */
        blk_account(dev, prev->cls, prev->op, BLK_OVERWRITTEN);
    struct rq_val v = {.ts = ts, .cls = (ioprio >> 13) & 7, .op = op};
    if (bpf_map_update_elem(&blk_issued, &k, &v, BPF_ANY))
        blk_account(dev, v.cls, op, BLK_LOST);
}

static __always_inline void blk_completed(__u32 dev, __u64 sector, __u16 ioprio, __u8 op) {
    struct rq_key k = {.dev = dev, .sector = sector};
    struct rq_val *v = bpf_map_lookup_elem(&blk_issued, &k);
    if (!v) {
        if (blk_tracked(&k))
            blk_account(dev, (ioprio >> 13) & 7, op, BLK_UNTIMED);
        return;
    }
    blk_count(dev, ioprio, op, 0, bpf_ktime_get_ns() - v->ts);
    bpf_map_delete_elem(&blk_issued, &k);
    if (cfg.filter_tasks)
        bpf_map_delete_elem(&blk_marked, &k);
}

/* -- classic tracepoints -- */
SEC("tracepoint/block/block_rq_insert")
int blk_insert(struct trace_event_raw_block_rq *args) {
    __u32 dev = args->dev;
    if (blk_dev_ok(dev))
        blk_inserted_at(dev, args->sector);
    return 0;
}

SEC("tracepoint/block/block_rq_issue")
int blk_issue(struct trace_event_raw_block_rq *args) {
    __u32 dev = args->dev;
    if (!blk_dev_ok(dev))
        return 0;
    blk_issued_at(dev, args->sector, args->ioprio, blk_op(args->rwbs[0], args->rwbs[1]));
    return 0;
}

SEC("tracepoint/block/block_rq_complete")
int blk_complete(struct trace_event_raw_block_rq_completion *args) {
    __u32 dev = args->dev;
    if (!blk_dev_ok(dev))
        return 0;
    blk_completed(dev, args->sector, args->ioprio, blk_op(args->rwbs[0], args->rwbs[1]));
    return 0;
}

/* -- tp_btf: struct request read directly -- */
/* Kernels before 6.13 keep the priority in struct request; newer ones take it from the first bio. */
struct request___with_ioprio { unsigned short ioprio; } __attribute__((preserve_access_index));

static __always_inline __u8 blk_op_of_flags(__u32 opf) {
    __u32 op = opf & 0xff; /* REQ_OP_MASK */
    if (op == REQ_OP_READ) return 0;
    if (op == REQ_OP_WRITE) return 1;
    if (op == REQ_OP_DISCARD || op == REQ_OP_SECURE_ERASE) return 3;
    if (op == REQ_OP_FLUSH || (opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH)))) return 2;
    return 4;
}

static __always_inline __u32 rq_dev(struct request *rq) {
    struct gendisk *disk = rq->q->disk;
    return disk ? ((__u32)disk->major << 20) | (__u32)disk->first_minor : 0;
}

static __always_inline __u16 rq_ioprio(struct request *rq) {
    if (bpf_core_field_exists(((struct request___with_ioprio *)0)->ioprio))
        return ((struct request___with_ioprio *)rq)->ioprio;
    struct bio *bio = rq->bio;
    return bio ? bio->bi_ioprio : 0;
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(blk_insert_btf, struct request *rq) {
    __u32 dev = rq_dev(rq);
    if (blk_dev_ok(dev))
        blk_inserted_at(dev, rq->__sector);
    return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(blk_issue_btf, struct request *rq) {
    __u32 dev = rq_dev(rq);
    if (!blk_dev_ok(dev))
        return 0;
    blk_issued_at(dev, rq->__sector, rq_ioprio(rq), blk_op_of_flags(rq->cmd_flags));
    return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(blk_complete_btf, struct request *rq, blk_status_t error, unsigned int nr_bytes) {
    __u32 dev = rq_dev(rq);
    if (!blk_dev_ok(dev))
        return 0;
    blk_completed(dev, rq->__sector, rq_ioprio(rq), blk_op_of_flags(rq->cmd_flags));
    return 0;
}

/* ---- reclaim --------------------------------------------------------------------------------------------- */
struct rc_start_t { __u64 ts; __u32 kind; };
struct rc_hkey { __u32 tgid; __u8 kind; __u8 slot; __u16 pad; };
struct rc_skey { __u32 tgid; __u32 kind; };
struct rc_stat { __u64 count; __u64 ns; __u64 reclaimed; __u64 cgid; };
HASH(rc_start, __u32, struct rc_start_t, 16384);
HASH(rc_hist, struct rc_hkey, __u64, 16384);
HASH(rc_stats, struct rc_skey, struct rc_stat, 16384);

static __always_inline int rc_begin(__u32 kind) {
    if (!wanted())
        return 0;
    __u32 tid = bpf_get_current_pid_tgid();
    struct rc_start_t s = {.ts = bpf_ktime_get_ns(), .kind = kind};
    bpf_map_update_elem(&rc_start, &tid, &s, BPF_ANY);
    return 0;
}

static __always_inline int rc_end(__u64 nr_reclaimed) {
    __u64 id = bpf_get_current_pid_tgid();
    __u32 tid = id, tgid = id >> 32;
    struct rc_start_t *s = bpf_map_lookup_elem(&rc_start, &tid);
    if (!s)
        return 0;
    __u64 delta = bpf_ktime_get_ns() - s->ts;
    struct rc_hkey hk = {.tgid = tgid, .kind = s->kind, .slot = kvds_log2l(delta / 1000)};
    kvds_increment(&rc_hist, &hk);
    struct rc_skey sk = {.tgid = tgid, .kind = s->kind};
    struct rc_stat zero = {};
    bpf_map_update_elem(&rc_stats, &sk, &zero, BPF_NOEXIST);
    struct rc_stat *st = bpf_map_lookup_elem(&rc_stats, &sk);
    if (st) {
        __sync_fetch_and_add(&st->count, 1);
        __sync_fetch_and_add(&st->ns, delta);
        __sync_fetch_and_add(&st->reclaimed, nr_reclaimed);
        st->cgid = bpf_get_current_cgroup_id();
    }
    remember_comm(tgid);
    bpf_map_delete_elem(&rc_start, &tid);
    return 0;
}

SEC("tracepoint/vmscan/mm_vmscan_direct_reclaim_begin")
int rc_direct_begin(void *args) { return rc_begin(0); }

SEC("tracepoint/vmscan/mm_vmscan_direct_reclaim_end")
int rc_direct_end(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *args) {
    return rc_end(args->nr_reclaimed);
}

SEC("tracepoint/vmscan/mm_vmscan_memcg_reclaim_begin")
int rc_memcg_begin(void *args) { return rc_begin(1); }

SEC("tracepoint/vmscan/mm_vmscan_memcg_reclaim_end")
int rc_memcg_end(struct trace_event_raw_mm_vmscan_direct_reclaim_end_template *args) {
    return rc_end(args->nr_reclaimed);
}

/* ---- faults ---------------------------------------------------------------------------------------------- */
/* exceptions:page_fault_{user,kernel} record, as tracefs prints it (x86; not in the kernel's BTF). */
struct kvds_page_fault {
    __u64 common;          /* type, flags, preempt_count, pid */
    unsigned long address;
    unsigned long ip;
    unsigned long error_code;
};
struct fault_key { __u32 tgid; __u8 kind; __u8 user; __u16 pad; };
HASH(fault_counts, struct fault_key, __u64, 65536);

static __always_inline int fault_count(unsigned long error_code, __u8 user) {
    if (!wanted())
        return 0;
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    /* x86 error_code: bit 0 protection (else not-present), bit 1 write, bit 4 instruction fetch. */
    struct fault_key k = {.tgid = tgid, .kind = error_code & 0x13, .user = user};
    kvds_increment(&fault_counts, &k);
    remember_comm(tgid);
    return 0;
}

SEC("tracepoint/exceptions/page_fault_user")
int fault_user(struct kvds_page_fault *args) { return fault_count(args->error_code, 1); }

SEC("tracepoint/exceptions/page_fault_kernel")
int fault_kernel(struct kvds_page_fault *args) { return fault_count(args->error_code, 0); }
