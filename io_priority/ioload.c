/* ioload: the I/O load generator behind `kvds io bench` (compiled by io_priority/native.py).
 *
 * Why C: a Python reader costs 20-40 us of CPU per read on this 2-vCPU host, more than the device; this
 * program issues reads and writes with no per-I/O interpreter work, so its unloaded QD1 latency can be
 * compared with fio's (`kvds io fio-check`).
 *
 * Why raw io_uring syscalls: the PyPI liburing wrapper cannot set sqe->ioprio or take aligned buffers; here
 * the SQE layout comes straight from the kernel UAPI header <linux/io_uring.h>, so the per-request priority
 * is exactly the value the mapping names (a test reads it back from block:block_rq_issue).
 *
 * Roles:
 *   reader  decode-critical KV reads: random, bs-aligned O_DIRECT reads from [off, off+len).
 *           --rate R > 0: open loop, read i is due at start + i/R; its latency is measured from that
 *           intended time (a stall delays later reads and they are charged for it: no coordinated
 *           omission). --rate 0: closed loop at queue depth 1, latency from submission.
 *   writer  cold KV spill: sequential bs writes over [off, off+len) (wrapping), qd in flight
 *           (io_uring: one ring, qd SQEs; psync: qd threads). O_DIRECT unless --buffered (then fsync
 *           every --fsync-every bytes, so page-cache writeback is part of the load).
 *           --pace slack: before each submission the writer reads the reader's published state and holds
 *           back while a critical read is in flight or when the writes already queued would not drain
 *           before the next read is due (the deadline-aware spill pacer).
 *
 * Protocol: each role prints "ready" once the device is open, then waits for "go <start_ns>" on stdin
 * (CLOCK_MONOTONIC); it runs until start + duration and prints one JSON line of counters. The reader
 * writes its latencies (int64 ns) to --out.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/io_uring.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NR_io_uring_setup 425
#define NR_io_uring_enter 426
#ifndef SYS_ioprio_set
#define SYS_ioprio_set 251
#endif

/* Shared between reader and writer (a small file in /dev/shm, zeroed before each repetition). */
struct slack_state {
    volatile int64_t next_due_ns;     /* intended issue time of the reader's next read */
    volatile int64_t inflight_since;  /* issue time of the read in flight, 0 when none */
    volatile int64_t reads_done;
    volatile int64_t interval_ns;
    /* published by the writer (paced or not): the reader marks each read that overlapped a spill write */
    volatile int64_t w_inflight;
    volatile int64_t w_submitted;
    volatile uint32_t read_seq;       /* futex word: bumped and woken after each read, the pacer waits on it */
};

/* Per-read context written with --ctx-out (one int64 per read, in the order of the latencies):
 * service_ns << 2 | bits, service_ns = completion - actual issue (excluding lateness behind earlier reads);
 * bit 0: a spill write was in flight when the read was issued; bit 1: a spill write was submitted while the
 * read was in flight. A read with neither is "clean": no spill write shared the device with it. */
#define CTX_WRITE_INFLIGHT 1
#define CTX_WRITE_SUBMITTED 2

enum { REAP_WAIT, REAP_FIO, REAP_SPIN };

struct opts {
    const char *role, *dev, *engine, *out, *shm, *pace, *ctx_out;
    long long bs, off, len, duration_ms, fsync_every, guard_us;
    double rate, budget_devs;
    int qd, prio, buffered, reap;
    unsigned long long seed;
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(int64_t t) {
    struct timespec ts = {t / 1000000000LL, t % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static void futex_wake_all(volatile uint32_t *w) {
    syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep while *w == seen, at most timeout_ns (a shared mapping: not FUTEX_PRIVATE). */
static void futex_wait_for(volatile uint32_t *w, uint32_t seen, int64_t timeout_ns, int private_) {
    if (timeout_ns <= 0) return;
    struct timespec ts = {timeout_ns / 1000000000LL, timeout_ns % 1000000000LL};
    syscall(SYS_futex, w, private_ ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void die(const char *what) {
    fprintf(stderr, "ioload: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void set_thread_prio(int prio) {
    if (prio >= 0 && syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0 /* calling thread */, prio) != 0)
        die("ioprio_set");
}

/* ---------- a minimal io_uring over raw syscalls ---------- */
struct ring {
    int fd;
    unsigned *sq_head, *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

#ifndef IORING_SETUP_COOP_TASKRUN
#define IORING_SETUP_COOP_TASKRUN (1U << 8)
#endif
#ifndef IORING_SETUP_SINGLE_ISSUER
#define IORING_SETUP_SINGLE_ISSUER (1U << 12)
#endif
#ifndef IORING_SETUP_DEFER_TASKRUN
#define IORING_SETUP_DEFER_TASKRUN (1U << 13)
#endif

/* Ring set-up flags. fio 3.33 asks for COOP_TASKRUN | SINGLE_ISSUER | DEFER_TASKRUN: completions are then
 * posted by the waiting task itself inside io_uring_enter(GETEVENTS) instead of through task_work that
 * interrupts it (TWA_SIGNAL). On a loop device, whose completions arrive from its kworker on the other vCPU,
 * the default mode cost about 2x fio's QD1 p50 (120 vs 55-65 us). --uring-flags plain|fio selects. */
static unsigned uring_setup_flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
static unsigned uring_flags_used;

static void ring_init(struct ring *r, unsigned entries) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = uring_setup_flags;
    r->fd = (int)syscall(NR_io_uring_setup, entries, &p);
    if (r->fd < 0 && errno == EINVAL && p.flags) {  /* older kernel: the flags are an optimisation only */
        memset(&p, 0, sizeof p);
        r->fd = (int)syscall(NR_io_uring_setup, entries, &p);
    }
    if (r->fd < 0) die("io_uring_setup");
    uring_flags_used = p.flags;
    size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    int single = p.features & IORING_FEAT_SINGLE_MMAP;
    if (single && cq_sz > sq_sz) sq_sz = cq_sz;
    char *sq = mmap(NULL, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    if (sq == MAP_FAILED) die("mmap sq ring");
    char *cq = sq;
    if (!single) {
        cq = mmap(NULL, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
        if (cq == MAP_FAILED) die("mmap cq ring");
    }
    r->sq_head = (unsigned *)(sq + p.sq_off.head);
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (r->sqes == MAP_FAILED) die("mmap sqes");
}

/* Queue one read/write SQE carrying the request's I/O priority (sqe->ioprio, the per-request field). */
static void ring_queue(struct ring *r, int op, int fd, void *buf, unsigned len, long long off, int prio,
                       unsigned long long tag) {
    unsigned tail = *r->sq_tail;
    unsigned idx = tail & *r->sq_mask;
    struct io_uring_sqe *sqe = &r->sqes[idx];
    memset(sqe, 0, sizeof *sqe);
    sqe->opcode = (unsigned char)op;
    sqe->fd = fd;
    sqe->addr = (unsigned long long)(uintptr_t)buf;
    sqe->len = len;
    sqe->off = (unsigned long long)off;
    sqe->ioprio = prio >= 0 ? (unsigned short)prio : 0;
    sqe->user_data = tag;
    r->sq_array[idx] = idx;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
}

static int ring_enter(struct ring *r, unsigned submit, unsigned wait) {
    for (;;) {
        /* GETEVENTS always: with DEFER_TASKRUN completions are only posted inside io_uring_enter(GETEVENTS),
         * so even a non-waiting call (wait = 0) must ask for them. */
        long ret = syscall(NR_io_uring_enter, r->fd, submit, wait, IORING_ENTER_GETEVENTS, NULL, 0);
        if (ret >= 0) return (int)ret;
        if (errno != EINTR) die("io_uring_enter");
    }
}

/* Pop one completion if present; returns 1 and fills res/tag. */
static int ring_pop(struct ring *r, int *res, unsigned long long *tag) {
    unsigned head = *r->cq_head;
    if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) return 0;
    struct io_uring_cqe *c = &r->cqes[head & *r->cq_mask];
    *res = c->res;
    *tag = c->user_data;
    __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
    return 1;
}

/* ---------- helpers ---------- */
static unsigned long long rng_state;
static unsigned long long xorshift(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static struct slack_state *map_shm(const char *path) {
    if (!path) return NULL;
    int fd = open(path, O_RDWR);
    if (fd < 0) die("open shm");
    void *p = mmap(NULL, sizeof(struct slack_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) die("mmap shm");
    close(fd);
    return (struct slack_state *)p;
}

static int64_t wait_go(void) {
    printf("ready\n");
    fflush(stdout);
    char line[128];
    long long start;
    if (!fgets(line, sizeof line, stdin) || sscanf(line, "go %lld", &start) != 1) {
        fprintf(stderr, "ioload: expected 'go <start_ns>' on stdin\n");
        exit(1);
    }
    return start;
}

static void *aligned(size_t n) {
    void *p;
    if (posix_memalign(&p, 4096, n)) die("posix_memalign");
    memset(p, 0x5a, n);
    return p;
}

/* ---------- reader ---------- */
static int reader(struct opts *o) {
    int fd = open(o->dev, O_RDONLY | O_DIRECT);
    if (fd < 0) die("open device for reading");
    int uring = strcmp(o->engine, "io_uring") == 0;
    struct ring r;
    if (uring) ring_init(&r, 4);
    else set_thread_prio(o->prio);
    void *buf = aligned((size_t)o->bs);
    long long nblocks = o->len / o->bs;
    if (nblocks < 1) { fprintf(stderr, "ioload: read region smaller than one block\n"); return 1; }
    struct slack_state *ss = map_shm(o->shm);
    int64_t interval = o->rate > 0 ? (int64_t)(1e9 / o->rate) : 0;
    size_t cap = o->rate > 0 ? (size_t)(o->rate * o->duration_ms / 1000.0) + 16 : 1 << 16;
    int64_t *lat = malloc(cap * sizeof(int64_t));
    int64_t *ctx = malloc(cap * sizeof(int64_t));
    if (!lat || !ctx) die("malloc");
    size_t n = 0;
    long long errors = 0, late = 0;
    rng_state = o->seed ? o->seed : 88172645463325252ULL;
    int64_t start = wait_go();
    int64_t end = start + o->duration_ms * 1000000LL;
    if (ss) { ss->interval_ns = interval; ss->next_due_ns = start; ss->inflight_since = 0; }
    sleep_until(start);
    for (long long i = 0;; i++) {
        int64_t due = interval ? start + i * interval : 0;
        if (interval) {
            if (due >= end) break;
            if (ss) ss->next_due_ns = due;
            if (now_ns() < due) sleep_until(due); else if (i) late++;
        }
        int64_t t0 = now_ns();
        if (!interval && t0 >= end) break;
        int64_t sub0 = 0, winf0 = 0;
        if (ss) {
            __atomic_store_n(&ss->inflight_since, t0, __ATOMIC_SEQ_CST);
            sub0 = __atomic_load_n(&ss->w_submitted, __ATOMIC_SEQ_CST);
            winf0 = __atomic_load_n(&ss->w_inflight, __ATOMIC_SEQ_CST);
        }
        long long off = o->off + (long long)(xorshift() % (unsigned long long)nblocks) * o->bs;
        long res;
        if (uring) {
            int cres; unsigned long long tag;
            ring_queue(&r, IORING_OP_READ, fd, buf, (unsigned)o->bs, off, o->prio, 1);
            if (o->reap == REAP_FIO) {
                /* fio's sequence: submit (min_complete 0), look at the CQ, then block for one completion */
                ring_enter(&r, 1, 0);
                while (!ring_pop(&r, &cres, &tag)) ring_enter(&r, 0, 1);
            } else if (o->reap == REAP_SPIN) {
                ring_enter(&r, 1, 0);
                while (!ring_pop(&r, &cres, &tag)) ring_enter(&r, 0, 0);
            } else {
                ring_enter(&r, 1, 1);
                while (!ring_pop(&r, &cres, &tag)) ring_enter(&r, 0, 1);
            }
            res = cres;
        } else {
            res = pread(fd, buf, (size_t)o->bs, off);
        }
        int64_t t1 = now_ns();
        unsigned char c = 0;
        if (ss) {
            if (winf0 > 0) c |= CTX_WRITE_INFLIGHT;
            if (__atomic_load_n(&ss->w_submitted, __ATOMIC_SEQ_CST) != sub0) c |= CTX_WRITE_SUBMITTED;
            ss->next_due_ns = interval ? start + (i + 1) * interval : t1;
            __atomic_store_n(&ss->inflight_since, 0, __ATOMIC_SEQ_CST);
            ss->reads_done++;
            __atomic_add_fetch(&ss->read_seq, 1, __ATOMIC_SEQ_CST);
            futex_wake_all(&ss->read_seq);  /* a paced writer waiting for this read's window */
        }
        if (res != o->bs) { errors++; continue; }
        if (n == cap) {
            cap *= 2;
            lat = realloc(lat, cap * sizeof(int64_t));
            ctx = realloc(ctx, cap * sizeof(int64_t));
            if (!lat || !ctx) die("realloc");
        }
        ctx[n] = ((t1 - t0) << 2) | c;
        lat[n++] = t1 - (interval ? due : t0);
    }
    int64_t elapsed = now_ns() - start;
    FILE *f = fopen(o->out, "wb");
    if (!f || fwrite(lat, sizeof(int64_t), n, f) != n || fclose(f)) die("write latencies");
    if (o->ctx_out) {
        f = fopen(o->ctx_out, "wb");
        if (!f || fwrite(ctx, sizeof(int64_t), n, f) != n || fclose(f)) die("write read contexts");
    }
    printf("{\"role\":\"reader\",\"reads\":%zu,\"errors\":%lld,\"late\":%lld,\"elapsed_ns\":%" PRId64 "}\n",
           n, errors, late, elapsed);
    return 0;
}

/* ---------- writer ---------- */
struct wshared {
    struct opts *o;
    int fd;
    int64_t end;
    struct slack_state *ss;  /* published to always (the reader marks overlapped reads); gates only if paced */
    int paced;
    pthread_mutex_t mu;
    long long next_off, bytes, writes, errors, gated_ns, since_fsync, submitted, skipped_windows;
    int inflight;
    int gated_waiters;      /* psync threads held back now; gated_ns counts time with at least one */
    int64_t gated_since;
    double est_ns, dev_ns;  /* per-write device time: EWMA of latency / depth, and of its absolute deviation */
    double one_ns, one_dev_ns;  /* latency of a write alone on the device (submitted at depth 1), EWMA + dev */
    uint32_t seq_seen;      /* the reader's read_seq when the pacer last looked */
    long long submitted_at_seq;
    volatile uint32_t completions;  /* private futex word: psync threads held back wait for a completion */
};

/* The time the pacer budgets for the writes queued plus one more to drain: the larger of (queued + 1) x the
 * per-write share (mean + --budget-devs deviations: a write that takes longer than its mean is exactly the
 * one still on the device when the read arrives) and the latency of one write alone (mean + deviations).
 * The per-write share is latency / depth; when the host serves several writes at once it is far below one
 * write's own latency, and budgeting the last write of a window by it would land that write on the read. */
static double drain_budget(struct wshared *w, int inflight) {
    double devs = w->o->budget_devs;
    double queued = (w->est_ns + devs * w->dev_ns) * (inflight + 1);
    double one = w->one_ns + devs * w->one_dev_ns;
    return queued > one ? queued : one;
}

/* The pacer's rule: may one more write be queued now without delaying the next critical read?
 * No while a read is in flight. Otherwise the writes queued plus this one, at the budgeted time each, plus
 * the guard, must end before the next read is due. Called with the writer's state locked. */
static int slack_allows(struct wshared *w, int inflight) {
    struct slack_state *ss = w->ss;
    if (!w->paced) return 1;
    uint32_t seq = __atomic_load_n(&ss->read_seq, __ATOMIC_ACQUIRE);
    if (seq != w->seq_seen) {
        /* A read finished. If the whole window before it passed without a write (budget too large to fit),
         * shrink the estimates a little (2%), so a budget inflated by one slow write cannot starve the spill. */
        if (w->submitted == w->submitted_at_seq && inflight == 0 && w->est_ns > 0) {
            w->est_ns *= 0.98;  /* halves in ~35 skipped windows: a gentle probe, not one per few reads */
            w->dev_ns *= 0.98;
            w->one_ns *= 0.98;
            w->one_dev_ns *= 0.98;
            w->skipped_windows++;
        }
        w->seq_seen = seq;
        w->submitted_at_seq = w->submitted;
    }
    if (__atomic_load_n(&ss->inflight_since, __ATOMIC_SEQ_CST)) return 0;
    int64_t slack = ss->next_due_ns - now_ns();
    double guard = w->o->guard_us * 1000.0;
    if (w->est_ns <= 0) return inflight == 0 && slack > guard;  /* first write: learn the estimate */
    return slack > drain_budget(w, inflight) + guard;
}

static void note_submit(struct wshared *w) {
    w->submitted++;
    if (w->ss) {
        __atomic_add_fetch(&w->ss->w_inflight, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&w->ss->w_submitted, 1, __ATOMIC_SEQ_CST);
    }
}

static void ewma(double *mean, double *dev, double x) {
    if (*mean <= 0) {
        *mean = x;
        *dev = x / 2;
        return;
    }
    double err = x - *mean;
    *mean += err / 8.0;
    *dev += ((err < 0 ? -err : err) - *dev) / 4.0;
}

static void note_completion(struct wshared *w, int64_t lat, int depth) {
    if (depth <= 1 || w->one_ns <= 0) ewma(&w->one_ns, &w->one_dev_ns, (double)lat);
    double per = (double)lat / (depth > 0 ? depth : 1);
    if (w->est_ns <= 0) {
        w->est_ns = per;
        w->dev_ns = per / 2;
    } else {
        double err = per - w->est_ns;
        w->est_ns += err / 8.0;
        w->dev_ns += ((err < 0 ? -err : err) - w->dev_ns) / 4.0;
    }
    if (w->ss) __atomic_sub_fetch(&w->ss->w_inflight, 1, __ATOMIC_SEQ_CST);
}

/* How long a held-back writer with nothing in flight may sleep: until the reader's next read completes
 * (futex on read_seq), bounded by the end of the run and two read intervals. */
static int64_t idle_wait_ns(struct wshared *w) {
    int64_t left = w->end - now_ns();
    int64_t cap = w->ss->interval_ns > 0 ? 2 * w->ss->interval_ns : 1000000;
    return left < cap ? left : cap;
}

static long long take_offset(struct wshared *w) {
    long long off = w->next_off;
    w->next_off += w->o->bs;
    if (w->next_off + w->o->bs > w->o->off + w->o->len) w->next_off = w->o->off;
    return off;
}

static void *psync_writer(void *arg) {
    struct wshared *w = arg;
    struct opts *o = w->o;
    set_thread_prio(o->prio);
    void *buf = aligned((size_t)o->bs);
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int held = 0;
        while (now_ns() < w->end && !slack_allows(w, w->inflight)) {
            if (!held && w->gated_waiters++ == 0) w->gated_since = now_ns();
            held = 1;
            /* Writes in flight: wake on the next completion (the budget may then fit), else on the next read. */
            int busy = w->inflight > 0;
            uint32_t seen = busy ? w->completions : w->ss->read_seq;
            int64_t wait = busy ? 200000 : idle_wait_ns(w);
            pthread_mutex_unlock(&w->mu);
            futex_wait_for(busy ? &w->completions : &w->ss->read_seq, seen, wait, busy);
            pthread_mutex_lock(&w->mu);
        }
        if (held && --w->gated_waiters == 0) w->gated_ns += now_ns() - w->gated_since;
        if (now_ns() >= w->end) { pthread_mutex_unlock(&w->mu); break; }
        long long off = take_offset(w);
        int depth = ++w->inflight;
        note_submit(w);
        pthread_mutex_unlock(&w->mu);
        int64_t t0 = now_ns();
        ssize_t res = pwrite(w->fd, buf, (size_t)o->bs, off);
        int64_t t1 = now_ns();
        pthread_mutex_lock(&w->mu);
        w->inflight--;
        note_completion(w, t1 - t0, depth);
        if (res == o->bs) { w->bytes += res; w->writes++; w->since_fsync += res; }
        else w->errors++;
        int do_sync = o->buffered && o->fsync_every > 0 && w->since_fsync >= o->fsync_every;
        if (do_sync) w->since_fsync = 0;
        __atomic_add_fetch(&w->completions, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&w->mu);
        futex_wake_all(&w->completions);
        if (do_sync) fsync(w->fd);
    }
    return NULL;
}

static void uring_writer(struct wshared *w) {
    struct opts *o = w->o;
    struct ring r;
    ring_init(&r, (unsigned)(o->qd < 2 ? 2 : o->qd));
    char *bufs = aligned((size_t)o->bs * (size_t)o->qd);
    int64_t *issued = calloc((size_t)o->qd, sizeof(int64_t));
    int *depth_at = calloc((size_t)o->qd, sizeof(int));
    int *free_slots = malloc((size_t)o->qd * sizeof(int));
    int nfree = o->qd;
    for (int i = 0; i < o->qd; i++) free_slots[i] = i;
    int64_t gate_since = 0;
    for (;;) {
        int stop = now_ns() >= w->end;
        unsigned queued = 0;
        int held = 0;
        while (!stop && nfree > 0) {
            if (!slack_allows(w, w->inflight)) { held = 1; break; }
            int slot = free_slots[--nfree];
            issued[slot] = now_ns();
            depth_at[slot] = ++w->inflight;
            note_submit(w);
            ring_queue(&r, IORING_OP_WRITE, w->fd, bufs + (size_t)slot * (size_t)o->bs, (unsigned)o->bs,
                       take_offset(w), o->prio, (unsigned long long)slot);
            queued++;
        }
        if (held && !gate_since) gate_since = now_ns();
        if (!held && gate_since) { w->gated_ns += now_ns() - gate_since; gate_since = 0; }
        if (queued || w->inflight > 0) ring_enter(&r, queued, 0);  /* submit, and post deferred completions */
        int got = 0, res;
        unsigned long long tag;
        while (ring_pop(&r, &res, &tag)) {
            int slot = (int)tag;
            w->inflight--;
            note_completion(w, now_ns() - issued[slot], depth_at[slot]);
            free_slots[nfree++] = slot;
            if (res == o->bs) { w->bytes += res; w->writes++; w->since_fsync += res; }
            else w->errors++;
            got++;
        }
        if (o->buffered && o->fsync_every > 0 && w->since_fsync >= o->fsync_every && w->inflight == 0) {
            fsync(w->fd);
            w->since_fsync = 0;
        }
        if (stop && w->inflight == 0) break;
        if (got || (queued && nfree > 0 && !held)) continue;
        if (w->inflight > 0) ring_enter(&r, 0, 1);  /* queue full, held back or draining: next completion */
        else if (held) futex_wait_for(&w->ss->read_seq, w->seq_seen, idle_wait_ns(w), 0);  /* next read */
    }
    if (gate_since) w->gated_ns += now_ns() - gate_since;
}

static int writer(struct opts *o) {
    struct wshared w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.fd = open(o->dev, O_WRONLY | (o->buffered ? 0 : O_DIRECT));
    if (w.fd < 0) die("open device for writing");
    w.ss = map_shm(o->shm);
    w.paced = w.ss != NULL && strcmp(o->pace, "slack") == 0;
    w.next_off = o->off;
    pthread_mutex_init(&w.mu, NULL);
    int uring = strcmp(o->engine, "io_uring") == 0;
    /* The main thread issues the io_uring writes' fsyncs and the final fsync: it carries the spill's class
     * too, so writeback it starts is tagged like the spill (what escapes is the flusher's share). */
    set_thread_prio(o->prio);
    int64_t start = wait_go();
    w.end = start + o->duration_ms * 1000000LL;
    sleep_until(start);
    if (uring) {
        uring_writer(&w);
    } else {
        pthread_t th[256];
        int n = o->qd > 256 ? 256 : o->qd;
        for (int i = 0; i < n; i++) pthread_create(&th[i], NULL, psync_writer, &w);
        for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
    }
    int64_t write_end = now_ns();
    if (o->buffered) fsync(w.fd);
    int64_t sync_end = now_ns();
    printf("{\"role\":\"writer\",\"bytes\":%lld,\"writes\":%lld,\"errors\":%lld,\"elapsed_ns\":%" PRId64
           ",\"final_fsync_ns\":%" PRId64 ",\"gated_ns\":%lld,\"est_service_ns\":%.0f,\"est_dev_ns\":%.0f"
           ",\"est_one_ns\":%.0f,\"skipped_windows\":%lld}\n",
           w.bytes, w.writes, w.errors, write_end - start, sync_end - write_end, w.gated_ns, w.est_ns, w.dev_ns,
           w.one_ns, w.skipped_windows);
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: ioload reader|writer --dev PATH [--engine psync|io_uring] [--bs N] [--off N] [--len N]\n"
            "       [--duration-ms N] [--prio N] [--rate R] [--out FILE] [--qd N] [--buffered]\n"
            "       [--fsync-every N] [--shm FILE] [--ctx-out FILE] [--pace none|slack] [--guard-us N] [--budget-devs X] [--seed N]\n"
            "       [--uring-flags fio|plain] [--reap fio|wait|spin]\n");
    exit(2);
}

int main(int argc, char **argv) {
    struct opts o = {.engine = "psync", .bs = 16384, .duration_ms = 1000, .prio = -1, .qd = 1,
                     .fsync_every = 64LL << 20, .pace = "none", .guard_us = 50, .reap = REAP_FIO,
                     .budget_devs = 2.0};
    if (argc < 2) usage();
    o.role = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && ++i)
        if (ARG("--dev")) o.dev = v;
        else if (ARG("--engine")) o.engine = v;
        else if (ARG("--bs")) o.bs = atoll(v);
        else if (ARG("--off")) o.off = atoll(v);
        else if (ARG("--len")) o.len = atoll(v);
        else if (ARG("--duration-ms")) o.duration_ms = atoll(v);
        else if (ARG("--prio")) o.prio = atoi(v);
        else if (ARG("--rate")) o.rate = atof(v);
        else if (ARG("--out")) o.out = v;
        else if (ARG("--qd")) o.qd = atoi(v);
        else if (ARG("--fsync-every")) o.fsync_every = atoll(v);
        else if (ARG("--shm")) o.shm = v;
        else if (ARG("--ctx-out")) o.ctx_out = v;
        else if (ARG("--pace")) o.pace = v;
        else if (ARG("--guard-us")) o.guard_us = atoll(v);
        else if (ARG("--budget-devs")) o.budget_devs = atof(v);
        else if (ARG("--seed")) o.seed = strtoull(v, NULL, 10);
        else if (ARG("--reap")) {
            if (strcmp(v, "fio") == 0) o.reap = REAP_FIO;       /* submit, then block for the completion */
            else if (strcmp(v, "wait") == 0) o.reap = REAP_WAIT; /* submit and wait in one io_uring_enter */
            else if (strcmp(v, "spin") == 0) o.reap = REAP_SPIN; /* never block: poll the CQ */
            else usage();
        }
        else if (ARG("--uring-flags")) {
            if (strcmp(v, "plain") == 0) uring_setup_flags = 0;
            else if (strcmp(v, "fio") != 0) usage();
        }
        else if (strcmp(a, "--buffered") == 0) o.buffered = 1;
        else usage();
#undef ARG
    }
    if (!o.dev || o.bs <= 0 || o.len <= 0 || o.qd < 1) usage();
    if (strcmp(o.engine, "psync") && strcmp(o.engine, "io_uring")) usage();
    if (strcmp(o.pace, "slack") && strcmp(o.pace, "none")) usage();
    /* Timer precision: the default 50 us slack would be charged to every open-loop read as lateness. */
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    if (strcmp(o.role, "reader") == 0) {
        if (!o.out) usage();
        return reader(&o);
    }
    if (strcmp(o.role, "writer") == 0) return writer(&o);
    usage();
    return 2;
}
