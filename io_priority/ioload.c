/* ioload: the I/O load generator behind `kvds io bench` (compiled by io_priority/ioload_launch.py, linked with liburing).
 *
 * Why C: a Python reader costs 20-40 us of CPU per read on this 2-vCPU host, more than the device; this
 * program issues reads and writes with no per-I/O interpreter work, so its latency can be compared with fio's
 * (`kvds io fio-check`).
 *
 * Why liburing: the C library (Debian liburing-dev) sets up the ring, maps it and lays out SQEs; the
 * per-request priority is a plain SQE field (sqe->ioprio = the mapping's value; a test reads it back from
 * block:block_rq_issue). (The PyPI wrapper's limits, a read-only ioprio and unaligned buffers, do not apply.)
 *
 * Roles:
 *   reader  decode-critical KV reads: random, bs-aligned O_DIRECT reads from [off, off+len).
 *           --rate R > 0: open loop, read i is due at start + i/R; its latency is measured from that
 *           intended time (no coordinated omission). --rate 0: closed loop at queue depth 1.
 *           --wait sleep|spin: how the reader waits for a read's due time and (io_uring) for its
 *           completion: sleep in clock_nanosleep / block in io_uring_enter (fio's rate limiting and reaping),
 *           or spin on the clock / poll the completion queue (a busy serving thread).
 *           Three clocks per read (--clocks-out): due (intended issue), submit, complete (CLOCK_MONOTONIC ns).
 *   writer  cold KV spill: sequential writes over [off, off+len) (wrapping). O_DIRECT unless --buffered.
 *           --pace none: bs writes, qd in flight (io_uring: one ring; psync: qd threads).
 *           --pace slack: the v1 pacer (holds back while a read is in flight or when the queued writes
 *           would not drain before the next read is due).
 *           --pace deadline: spill scheduler v2 (io_uring whatever --engine says: a batch at a chosen depth
 *           from one thread). After each critical read completes, it submits batches of k writes of size s
 *           (s from --bs-min to --bs in powers of two, k <= --qd) chosen so that the batch's predicted tail
 *           completion time plus --guard-us fits in the slack before the next read is due; the prediction is
 *           the --model-q quantile of the last 16 observed batch times at (s, k) (never a mean plus deviations),
 *           extrapolated conservatively (linearly in bytes) from the nearest observed smaller batch.
 *           --wlog-out: per write (submit, complete, bytes), for stall detection and the learned model.
 *
 * Protocol: each role prints "ready" once the device is open, then waits for "go <start_ns>" on stdin
 * (CLOCK_MONOTONIC); it runs until start + duration and prints one JSON line of counters.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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
 * service_ns << 2 | bits; bit 0: a spill write was in flight when the read was issued; bit 1: a spill write
 * was submitted while the read was in flight. A read with neither is "clean". */
#define CTX_WRITE_INFLIGHT 1
#define CTX_WRITE_SUBMITTED 2

enum { REAP_WAIT, REAP_FIO, REAP_SPIN };
enum { WAIT_SLEEP, WAIT_SPIN };
enum { PACE_NONE, PACE_SLACK, PACE_DEADLINE };

struct opts {
    const char *role, *dev, *engine, *out, *shm, *ctx_out, *clocks_out, *wlog_out;
    long long bs, bs_min, off, len, duration_ms, fsync_every, guard_us;
    double rate, budget_devs, model_q;
    int qd, prio, buffered, reap, wait, pace;
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

static void spin_until(int64_t t) {
    while (now_ns() < t) __builtin_ia32_pause();
}

static void futex_wake_all(volatile uint32_t *w) {
    syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep while *w == seen, at most timeout_ns (a shared mapping: not FUTEX_PRIVATE unless private_). */
static void futex_wait_for(volatile uint32_t *w, uint32_t seen, int64_t timeout_ns, int private_) {
    if (timeout_ns <= 0) return;
    struct timespec ts = {timeout_ns / 1000000000LL, timeout_ns % 1000000000LL};
    syscall(SYS_futex, w, private_ ? FUTEX_WAIT_PRIVATE : FUTEX_WAIT, seen, &ts, NULL, 0);
}

static void die(const char *what) {
    fprintf(stderr, "ioload: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void die_ret(const char *what, int ret) {  /* liburing returns -errno */
    errno = -ret;
    die(what);
}

static void set_thread_prio(int prio) {
    if (prio >= 0 && syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0 /* calling thread */, prio) != 0)
        die("ioprio_set");
}

/* ---------- io_uring through liburing ---------- */
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
 * interrupts it. On a loop device, whose completions arrive from its kworker on the other vCPU, the default
 * mode cost about 2x fio's QD1 p50 (120 vs 55-65 us). --uring-flags plain|fio selects. */
static unsigned uring_setup_flags = IORING_SETUP_COOP_TASKRUN | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;

static void ring_init(struct io_uring *r, unsigned entries) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    p.flags = uring_setup_flags;
    int ret = io_uring_queue_init_params(entries, r, &p);
    if (ret == -EINVAL && p.flags) {  /* older kernel: the flags are an optimisation only */
        memset(&p, 0, sizeof p);
        ret = io_uring_queue_init_params(entries, r, &p);
    }
    if (ret < 0) die_ret("io_uring_queue_init_params", ret);
}

/* Queue one read/write carrying the request's I/O priority in its SQE (the per-request field). */
static void ring_queue(struct io_uring *r, int op, int fd, void *buf, unsigned len, long long off, int prio,
                       unsigned long long tag) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(r);
    if (!sqe) { errno = EBUSY; die("io_uring_get_sqe"); }
    io_uring_prep_rw(op, sqe, fd, buf, len, (__u64)off);
    sqe->ioprio = prio >= 0 ? (unsigned short)prio : 0;
    io_uring_sqe_set_data64(sqe, tag);
}

/* Submit what is queued and post deferred completions without waiting: fio's commit,
 * io_uring_enter(n, 0, GETEVENTS) (with DEFER_TASKRUN completions are only posted inside GETEVENTS). */
static void ring_submit(struct io_uring *r) {
    int ret;
    while ((ret = io_uring_submit_and_get_events(r)) == -EINTR) {}
    if (ret < 0) die_ret("io_uring_submit_and_get_events", ret);
}

/* Pop one completion if present; returns 1 and fills res/tag. */
static int ring_pop(struct io_uring *r, int *res, unsigned long long *tag) {
    struct io_uring_cqe *c;
    if (io_uring_peek_cqe(r, &c) != 0 || !c) return 0;
    *res = c->res;
    *tag = io_uring_cqe_get_data64(c);
    io_uring_cqe_seen(r, c);
    return 1;
}

/* Block until one completion is there (io_uring_enter(0, 1, GETEVENTS)), then pop it. */
static void ring_wait(struct io_uring *r, int *res, unsigned long long *tag) {
    struct io_uring_cqe *c;
    int ret;
    while ((ret = io_uring_wait_cqe(r, &c)) == -EINTR) {}
    if (ret < 0) die_ret("io_uring_wait_cqe", ret);
    *res = c->res;
    *tag = io_uring_cqe_get_data64(c);
    io_uring_cqe_seen(r, c);
}

/* Post deferred completions without waiting (a spinning reaper's poll). */
static void ring_poll(struct io_uring *r) {
    int ret = io_uring_get_events(r);
    if (ret < 0 && ret != -EINTR && ret != -EAGAIN && ret != -EBUSY) die_ret("io_uring_get_events", ret);
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

/* A growable array of int64 records (reads' clocks, writes' log). */
struct rec { int64_t *v; size_t n, cap; };

static void rec_push(struct rec *r, int64_t a, int64_t b, int64_t c) {
    if (r->n + 3 > r->cap) {
        r->cap = r->cap ? r->cap * 2 : 3 * 4096;
        r->v = realloc(r->v, r->cap * sizeof(int64_t));
        if (!r->v) die("realloc");
    }
    r->v[r->n++] = a;
    r->v[r->n++] = b;
    r->v[r->n++] = c;
}

static void write_file(const char *path, const void *p, size_t bytes, const char *what) {
    FILE *f = fopen(path, "wb");
    if (!f || (bytes && fwrite(p, 1, bytes, f) != bytes) || fclose(f)) die(what);
}

/* ---------- reader ---------- */
static int reader(struct opts *o) {
    int fd = open(o->dev, O_RDONLY | O_DIRECT);
    if (fd < 0) die("open device for reading");
    int uring = strcmp(o->engine, "io_uring") == 0;
    struct io_uring r;
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
    struct rec clocks = {0};
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
            if (now_ns() < due) {
                if (o->wait == WAIT_SPIN) spin_until(due); else sleep_until(due);
            } else if (i) late++;
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
            if (o->reap == REAP_SPIN || o->wait == WAIT_SPIN) {
                /* a busy serving thread: submit, then poll the CQ without ever blocking */
                ring_submit(&r);
                while (!ring_pop(&r, &cres, &tag)) ring_poll(&r);
            } else if (o->reap == REAP_FIO) {
                /* fio's sequence: submit (min_complete 0), look at the CQ, then block for one completion */
                ring_submit(&r);
                if (!ring_pop(&r, &cres, &tag)) ring_wait(&r, &cres, &tag);
            } else {
                int ret;
                while ((ret = io_uring_submit_and_wait(&r, 1)) == -EINTR) {}
                if (ret < 0) die_ret("io_uring_submit_and_wait", ret);
                if (!ring_pop(&r, &cres, &tag)) ring_wait(&r, &cres, &tag);
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
        rec_push(&clocks, interval ? due : t0, t0, t1);
    }
    int64_t elapsed = now_ns() - start;
    write_file(o->out, lat, n * sizeof(int64_t), "write latencies");
    if (o->ctx_out) write_file(o->ctx_out, ctx, n * sizeof(int64_t), "write read contexts");
    if (o->clocks_out) write_file(o->clocks_out, clocks.v, clocks.n * sizeof(int64_t), "write read clocks");
    printf("{\"role\":\"reader\",\"reads\":%zu,\"errors\":%lld,\"late\":%lld,\"elapsed_ns\":%" PRId64
           ",\"start_ns\":%" PRId64 "}\n", n, errors, late, elapsed, start);
    return 0;
}

/* ---------- writer ---------- */
#define NSIZES 8
#define MAXQD 64
#define MODEL_RING 16
#define MODEL_MIN 4   /* observations before a bucket's own quantile is trusted */
#define PROBE_AFTER 4 /* windows in a row without a batch before one smallest write probes the device again */

/* Spill scheduler v2's latency model: per (size, depth) the last MODEL_RING batch completion times. */
struct model {
    int64_t obs[NSIZES][MAXQD + 1][MODEL_RING];
    int n[NSIZES][MAXQD + 1];
};

struct wshared {
    struct opts *o;
    int fd;
    int64_t end;
    struct slack_state *ss;  /* published to always (the reader marks overlapped reads); gates only if paced */
    int paced;
    pthread_mutex_t mu;
    long long next_off, bytes, writes, errors, gated_ns, since_fsync, submitted, skipped_windows, batches, probes;
    int inflight;
    int gated_waiters;
    int64_t gated_since;
    double est_ns, dev_ns;
    double one_ns, one_dev_ns;
    uint32_t seq_seen;
    long long submitted_at_seq;
    volatile uint32_t completions;
    struct rec wlog;         /* per write: submit, complete, bytes */
    struct model *model;     /* --pace deadline */
    long long sizes[NSIZES];
    int nsizes;
    long long chosen[NSIZES][MAXQD + 1];  /* batches submitted per (size, depth) */
};

static double drain_budget(struct wshared *w, int inflight) {
    double devs = w->o->budget_devs;
    double queued = (w->est_ns + devs * w->dev_ns) * (inflight + 1);
    double one = w->one_ns + devs * w->one_dev_ns;
    return queued > one ? queued : one;
}

/* The v1 pacer's rule (--pace slack), called with the writer's state locked. */
static int slack_allows(struct wshared *w, int inflight) {
    struct slack_state *ss = w->ss;
    if (!w->paced) return 1;
    uint32_t seq = __atomic_load_n(&ss->read_seq, __ATOMIC_ACQUIRE);
    if (seq != w->seq_seen) {
        if (w->submitted == w->submitted_at_seq && inflight == 0 && w->est_ns > 0) {
            w->est_ns *= 0.98;
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
    if (w->est_ns <= 0) return inflight == 0 && slack > guard;
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
    if (*mean <= 0) { *mean = x; *dev = x / 2; return; }
    double err = x - *mean;
    *mean += err / 8.0;
    *dev += ((err < 0 ? -err : err) - *dev) / 4.0;
}

static void note_completion(struct wshared *w, int64_t t_sub, int64_t t_done, long long bytes, int depth) {
    int64_t lat = t_done - t_sub;
    if (depth <= 1 || w->one_ns <= 0) ewma(&w->one_ns, &w->one_dev_ns, (double)lat);
    double per = (double)lat / (depth > 0 ? depth : 1);
    if (w->est_ns <= 0) { w->est_ns = per; w->dev_ns = per / 2; }
    else {
        double err = per - w->est_ns;
        w->est_ns += err / 8.0;
        w->dev_ns += ((err < 0 ? -err : err) - w->dev_ns) / 4.0;
    }
    if (w->ss) __atomic_sub_fetch(&w->ss->w_inflight, 1, __ATOMIC_SEQ_CST);
    rec_push(&w->wlog, t_sub, t_done, bytes);
}

static int64_t idle_wait_ns(struct wshared *w) {
    int64_t left = w->end - now_ns();
    int64_t cap = w->ss && w->ss->interval_ns > 0 ? 2 * w->ss->interval_ns : 1000000;
    return left < cap ? left : cap;
}

static long long take_offset(struct wshared *w, long long bs) {
    if (w->next_off + bs > w->o->off + w->o->len) w->next_off = w->o->off;
    long long off = w->next_off;
    w->next_off += bs;
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
            int busy = w->inflight > 0;
            uint32_t seen = busy ? w->completions : w->ss->read_seq;
            int64_t wait = busy ? 200000 : idle_wait_ns(w);
            pthread_mutex_unlock(&w->mu);
            futex_wait_for(busy ? &w->completions : &w->ss->read_seq, seen, wait, busy);
            pthread_mutex_lock(&w->mu);
        }
        if (held && --w->gated_waiters == 0) w->gated_ns += now_ns() - w->gated_since;
        if (now_ns() >= w->end) { pthread_mutex_unlock(&w->mu); break; }
        long long off = take_offset(w, o->bs);
        int depth = ++w->inflight;
        note_submit(w);
        pthread_mutex_unlock(&w->mu);
        int64_t t0 = now_ns();
        ssize_t res = pwrite(w->fd, buf, (size_t)o->bs, off);
        int64_t t1 = now_ns();
        pthread_mutex_lock(&w->mu);
        w->inflight--;
        note_completion(w, t0, t1, res > 0 ? res : 0, depth);
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

/* One completed io_uring write: its latency into the model, its slot back on the free list; returns nfree. */
static int uring_write_done(struct wshared *w, int res, int slot, const int64_t *issued, const int *depth_at,
                            int *free_slots, int nfree) {
    w->inflight--;
    note_completion(w, issued[slot], now_ns(), res > 0 ? res : 0, depth_at[slot]);
    free_slots[nfree++] = slot;
    if (res == w->o->bs) { w->bytes += res; w->writes++; w->since_fsync += res; }
    else w->errors++;
    return nfree;
}

static void uring_writer(struct wshared *w) {
    struct opts *o = w->o;
    struct io_uring r;
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
                       take_offset(w, o->bs), o->prio, (unsigned long long)slot);
            queued++;
        }
        if (held && !gate_since) gate_since = now_ns();
        if (!held && gate_since) { w->gated_ns += now_ns() - gate_since; gate_since = 0; }
        if (queued || w->inflight > 0) ring_submit(&r);  /* submit, and post deferred completions */
        int got = 0, res;
        unsigned long long tag;
        while (ring_pop(&r, &res, &tag)) {
            nfree = uring_write_done(w, res, (int)tag, issued, depth_at, free_slots, nfree);
            got++;
        }
        if (o->buffered && o->fsync_every > 0 && w->since_fsync >= o->fsync_every && w->inflight == 0) {
            fsync(w->fd);
            w->since_fsync = 0;
        }
        if (stop && w->inflight == 0) break;
        if (got || (queued && nfree > 0 && !held)) continue;
        if (w->inflight > 0) {  /* queue full, held back or draining: next completion */
            ring_wait(&r, &res, &tag);
            nfree = uring_write_done(w, res, (int)tag, issued, depth_at, free_slots, nfree);
        } else if (held) futex_wait_for(&w->ss->read_seq, w->seq_seen, idle_wait_ns(w), 0);  /* next read */
    }
    if (gate_since) w->gated_ns += now_ns() - gate_since;
    io_uring_queue_exit(&r);
}

/* ---------- spill scheduler v2 (--pace deadline) ---------- */
static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The --model-q quantile of a bucket's observed batch times, or -1 with fewer than MODEL_MIN observations. */
static double bucket_tail(struct wshared *w, int si, int k) {
    int n = w->model->n[si][k];
    if (n < MODEL_MIN) return -1;
    if (n > MODEL_RING) n = MODEL_RING;
    int64_t tmp[MODEL_RING];
    memcpy(tmp, w->model->obs[si][k], (size_t)n * sizeof(int64_t));
    qsort(tmp, (size_t)n, sizeof(int64_t), cmp64);
    double pos = w->o->model_q * (n - 1);
    int lo = (int)pos;
    double frac = pos - lo;
    return lo + 1 < n ? tmp[lo] * (1 - frac) + tmp[lo + 1] * frac : (double)tmp[lo];
}

/* Predicted tail time of a batch of k writes of size sizes[si]: the bucket's own quantile when it has enough
 * observations, else the tail of the nearest observed smaller batch (fewer bytes) scaled by bytes (linear
 * scaling counts the per-batch overhead again, so it over-predicts: conservative). -1: nothing to go on. */
static double predict(struct wshared *w, int si, int k) {
    double own = bucket_tail(w, si, k);
    if (own >= 0) return own;
    double best = -1;
    long long bytes = w->sizes[si] * k, best_bytes = 0;
    for (int s2 = 0; s2 < w->nsizes; s2++)
        for (int k2 = 1; k2 <= w->o->qd; k2++) {
            long long b2 = w->sizes[s2] * k2;
            if (b2 >= bytes || b2 <= best_bytes) continue;
            double t = bucket_tail(w, s2, k2);
            if (t < 0) continue;
            best = t * (double)bytes / (double)b2;
            best_bytes = b2;
        }
    return best;
}

static void model_add(struct wshared *w, int si, int k, int64_t t) {
    int i = w->model->n[si][k]++ % MODEL_RING;
    w->model->obs[si][k][i] = t;
}

/* The largest batch (bytes) whose predicted tail plus the guard fits in `slack`; with no observation at all, the
 * smallest batch (one write of the smallest size) when the slack is at least --explore-frac of a read interval.
 * Returns 0 when nothing fits. */
static int choose_batch(struct wshared *w, int64_t slack, int *si_out, int *k_out, int probe) {
    double guard = w->o->guard_us * 1000.0;
    long long best = 0;
    int any_model = 0;
    for (int si = 0; si < w->nsizes; si++)
        for (int k = 1; k <= w->o->qd; k++) {
            double t = predict(w, si, k);
            if (t < 0) continue;
            any_model = 1;
            long long bytes = w->sizes[si] * k;
            if (t + guard <= (double)slack && (bytes > best || (bytes == best && si > *si_out))) {
                best = bytes;
                *si_out = si;
                *k_out = k;
            }
        }
    if (best > 0) return 1;
    /* learn: one smallest write with half a window of slack, when nothing has been observed yet, or when the
     * model has let PROBE_AFTER windows in a row pass without a write (a tail learned in a slow moment would
     * otherwise keep every later window empty, and nothing would ever correct it) */
    if ((!any_model || probe) && slack > w->ss->interval_ns / 2) {
        *si_out = 0;
        *k_out = 1;
        w->probes += any_model;
        return 1;
    }
    return 0;
}

static void deadline_writer(struct wshared *w) {
    struct opts *o = w->o;
    struct io_uring r;
    ring_init(&r, (unsigned)(o->qd < 2 ? 2 : o->qd));
    char *bufs = aligned((size_t)o->bs * (size_t)o->qd);
    int64_t *issued = calloc((size_t)o->qd, sizeof(int64_t));
    int64_t gate_since = now_ns();
    long long idle_windows = 0;  /* windows in a row without a batch */
    while (now_ns() < w->end) {
        struct slack_state *ss = w->ss;
        uint32_t seq = __atomic_load_n(&ss->read_seq, __ATOMIC_ACQUIRE);
        int si = 0, k = 0;
        int64_t now = now_ns();
        int64_t slack = ss->next_due_ns - now;
        if (__atomic_load_n(&ss->inflight_since, __ATOMIC_SEQ_CST) ||
            !choose_batch(w, slack, &si, &k, idle_windows >= PROBE_AFTER)) {
            /* nothing fits before the next read: sleep until that read completes (a fresh window) */
            futex_wait_for(&ss->read_seq, seq, idle_wait_ns(w), 0);
            uint32_t s2 = __atomic_load_n(&ss->read_seq, __ATOMIC_ACQUIRE);
            if (s2 != w->seq_seen) {
                if (w->submitted == w->submitted_at_seq) { w->skipped_windows++; idle_windows++; }
                else idle_windows = 0;
                w->seq_seen = s2;
                w->submitted_at_seq = w->submitted;
            }
            continue;
        }
        idle_windows = 0;
        w->gated_ns += now - gate_since;
        long long bs = w->sizes[si];
        int64_t t0 = now_ns();
        for (int j = 0; j < k; j++) {
            issued[j] = t0;
            ++w->inflight;
            note_submit(w);
            ring_queue(&r, IORING_OP_WRITE, w->fd, bufs + (size_t)j * (size_t)bs, (unsigned)bs,
                       take_offset(w, bs), o->prio, (unsigned long long)j);
        }
        ring_submit(&r);
        w->batches++;
        w->chosen[si][k]++;
        int64_t last = t0;
        for (int done = 0; done < k;) {
            int res; unsigned long long tag;
            if (!ring_pop(&r, &res, &tag)) ring_wait(&r, &res, &tag);
            int64_t t1 = now_ns();
            last = t1;
            w->inflight--;
            note_completion(w, issued[tag], t1, res > 0 ? res : 0, k);
            if (res == bs) { w->bytes += res; w->writes++; w->since_fsync += res; }
            else w->errors++;
            done++;
        }
        model_add(w, si, k, last - t0);
        if (o->buffered && o->fsync_every > 0 && w->since_fsync >= o->fsync_every) {
            fsync(w->fd);
            w->since_fsync = 0;
        }
        gate_since = now_ns();
    }
    w->gated_ns += now_ns() - gate_since;
    io_uring_queue_exit(&r);
}

static void print_model(struct wshared *w) {
    printf(",\"model_q\":%.3f,\"batches\":%lld,\"probes\":%lld,\"model\":[", w->o->model_q, w->batches,
           w->probes);
    int first = 1;
    for (int si = 0; si < w->nsizes; si++)
        for (int k = 1; k <= w->o->qd; k++) {
            if (!w->model->n[si][k]) continue;
            printf("%s{\"size\":%lld,\"depth\":%d,\"n\":%d,\"tail_ns\":%.0f,\"chosen\":%lld}", first ? "" : ",",
                   w->sizes[si], k, w->model->n[si][k], bucket_tail(w, si, k), w->chosen[si][k]);
            first = 0;
        }
    printf("]");
}

static int writer(struct opts *o) {
    struct wshared w;
    memset(&w, 0, sizeof w);
    w.o = o;
    w.fd = open(o->dev, O_WRONLY | (o->buffered ? 0 : O_DIRECT));
    if (w.fd < 0) die("open device for writing");
    w.ss = map_shm(o->shm);
    w.paced = w.ss != NULL && o->pace == PACE_SLACK;
    if (o->pace == PACE_DEADLINE) {
        if (!w.ss) { fprintf(stderr, "ioload: --pace deadline needs --shm\n"); return 2; }
        w.model = calloc(1, sizeof(struct model));
        if (!w.model) die("calloc");
        for (long long s = o->bs_min; s <= o->bs && w.nsizes < NSIZES; s *= 2) w.sizes[w.nsizes++] = s;
        if (w.sizes[w.nsizes - 1] != o->bs && w.nsizes < NSIZES) w.sizes[w.nsizes++] = o->bs;
    }
    w.next_off = o->off;
    pthread_mutex_init(&w.mu, NULL);
    int uring = strcmp(o->engine, "io_uring") == 0;
    set_thread_prio(o->prio);
    int64_t start = wait_go();
    w.end = start + o->duration_ms * 1000000LL;
    sleep_until(start);
    if (o->pace == PACE_DEADLINE) {
        deadline_writer(&w);
    } else if (uring) {
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
    if (o->wlog_out) write_file(o->wlog_out, w.wlog.v, w.wlog.n * sizeof(int64_t), "write the write log");
    printf("{\"role\":\"writer\",\"bytes\":%lld,\"writes\":%lld,\"errors\":%lld,\"elapsed_ns\":%" PRId64
           ",\"final_fsync_ns\":%" PRId64 ",\"gated_ns\":%lld,\"est_service_ns\":%.0f,\"est_dev_ns\":%.0f"
           ",\"est_one_ns\":%.0f,\"skipped_windows\":%lld,\"start_ns\":%" PRId64,
           w.bytes, w.writes, w.errors, write_end - start, sync_end - write_end, w.gated_ns, w.est_ns, w.dev_ns,
           w.one_ns, w.skipped_windows, start);
    if (w.model) print_model(&w);
    printf("}\n");
    return 0;
}

static void usage(void) {
    fprintf(stderr,
            "usage: ioload reader|writer --dev PATH [--engine psync|io_uring] [--bs N] [--off N] [--len N]\n"
            "       [--duration-ms N] [--prio N] [--rate R] [--out FILE] [--qd N] [--buffered]\n"
            "       [--fsync-every N] [--shm FILE] [--ctx-out FILE] [--clocks-out FILE] [--wlog-out FILE]\n"
            "       [--pace none|slack|deadline] [--guard-us N] [--budget-devs X] [--bs-min N] [--model-q Q]\n"
            "       [--seed N] [--uring-flags fio|plain] [--reap fio|wait|spin] [--wait sleep|spin]\n");
    exit(2);
}

int main(int argc, char **argv) {
    struct opts o = {.engine = "psync", .bs = 16384, .bs_min = 0, .duration_ms = 1000, .prio = -1, .qd = 1,
                     .fsync_every = 64LL << 20, .guard_us = 50, .reap = REAP_FIO, .budget_devs = 2.0,
                     .model_q = 0.95};
    if (argc < 2) usage();
    o.role = argv[1];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(name) (strcmp(a, name) == 0 && v && ++i)
        if (ARG("--dev")) o.dev = v;
        else if (ARG("--engine")) o.engine = v;
        else if (ARG("--bs")) o.bs = atoll(v);
        else if (ARG("--bs-min")) o.bs_min = atoll(v);
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
        else if (ARG("--clocks-out")) o.clocks_out = v;
        else if (ARG("--wlog-out")) o.wlog_out = v;
        else if (ARG("--guard-us")) o.guard_us = atoll(v);
        else if (ARG("--budget-devs")) o.budget_devs = atof(v);
        else if (ARG("--model-q")) o.model_q = atof(v);
        else if (ARG("--seed")) o.seed = strtoull(v, NULL, 10);
        else if (ARG("--pace")) {
            if (strcmp(v, "none") == 0) o.pace = PACE_NONE;
            else if (strcmp(v, "slack") == 0) o.pace = PACE_SLACK;
            else if (strcmp(v, "deadline") == 0) o.pace = PACE_DEADLINE;
            else usage();
        }
        else if (ARG("--wait")) {
            if (strcmp(v, "sleep") == 0) o.wait = WAIT_SLEEP;
            else if (strcmp(v, "spin") == 0) o.wait = WAIT_SPIN;
            else usage();
        }
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
    if (o.pace == PACE_DEADLINE && o.qd > MAXQD) usage();  /* the model's depth buckets */
    if (o.bs_min <= 0 || o.bs_min > o.bs) o.bs_min = o.bs;
    if (!(o.model_q > 0 && o.model_q <= 1)) usage();
    if (strcmp(o.engine, "psync") && strcmp(o.engine, "io_uring")) usage();
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
