// SPDX-License-Identifier: GPL-2.0
/*
 * reclaim_bench: what mm_intent costs reclaim, and what it protects. In a memory cgroup of its own with swap
 * (cgroup2 mounted if it is not; an unused zram0 made a swap device if no swap is on), each round faults the
 * whole arena back in, then asks memory.reclaim for twice its size and times that write; pgscan and pgsteal
 * come from the cgroup's memory.stat, residency from /proc/self/pagemap. States, in this order ("off" first, before
 * anything registers; "empty" and "on" then alternate round by round):
 *   warmup    WARMUP_ROUNDS rounds before "off", not compared: the first reclaim of a boot also allocates zram's
 *             and the swap map's first pages, and the first phase of a boot ran slower than the next (kernel
 *             work left over from boot), which "off" alone would pay
 *   off       nothing registered since boot: the hooks are patched-out branches
 *   empty     the key is on, this address space has no intents: one pointer test per mapping. A keeper child
 *             holds one intent of its own from here on, since a series that turns the key off when the last
 *             address space with intents goes (0010) would otherwise make "empty" another "off"
 *   on        MAX_RANGES one-page latency-critical ranges on a mapping reclaim never sees (never faulted):
 *             every arena folio is looked up in this address space's ranges and none matches, so the
 *             decisions are those of "off" and the difference is the cost of the lookups
 *   critical  the first half of the arena registered latency-critical: what the consumer protects
 * Prints one line per round: "reclaim_bench <state> round=<i> ns=<..> pgscan=<..> pgsteal=<..>
 * swapped=<..> swapped_critical=<..> present_critical=<..> ref_ns=<..>", and "reclaim_bench feature=<0|1>" first.
 * ref_ns times a fixed user-space loop (REF_ITERS steps of xorshift, registers only) just before and just after
 * the memory.reclaim write: under TCG the guest's speed and its clock's rate both move from boot to boot and
 * within a boot (the host's other work), and they move the loop as they move reclaim, so ns/ref_ns compares
 * kernels that cannot share a boot.
 * Usage: reclaim_bench [ROUNDS] [ARENA_MB]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MI "/sys/kernel/debug/mm_intent/"
#define ZRAM "/sys/block/zram0"
#define ZRAM_DEV "/dev/zram0"
#define MAX_RANGES 1024
#define PAGE 4096UL
#define REF_ITERS (1UL << 21)
#define WARMUP_ROUNDS 3

static char cg[300];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), err = 0;

	if (fd < 0)
		return errno;
	if (write(fd, s, strlen(s)) < 0)
		err = errno;
	close(fd);
	return err;
}

static int write_at(const char *dir, const char *name, const char *s)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return write_file(path, s);
}

/* A counter of the cgroup's memory.stat (0 when absent). */
static unsigned long memstat(const char *key)
{
	char path[512], name[64];
	unsigned long v, found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/memory.stat", cg);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fscanf(f, "%63s %lu", name, &v) == 2)
		if (!strcmp(name, key))
			found = v;
	fclose(f);
	return found;
}

static int swap_on(void)
{
	char line[256], buf[32], *page;
	int n = -1, fd, ok;
	unsigned long bytes = 512UL << 20;
	FILE *f = fopen("/proc/swaps", "r");

	while (f && fgets(line, sizeof(line), f))
		n++;
	if (f)
		fclose(f);
	if (n > 0)
		return 0;
	fd = open(ZRAM "/disksize", O_RDONLY);
	if (fd < 0)
		return -1;
	ok = read(fd, buf, sizeof(buf) - 1) > 0 && atol(buf) == 0;
	close(fd);
	snprintf(buf, sizeof(buf), "%lu", bytes);
	if (!ok || write_file(ZRAM "/disksize", buf))
		return -1;
	page = calloc(1, PAGE);
	*(uint32_t *)(page + 1024) = 1;			/* swap header version */
	*(uint32_t *)(page + 1028) = bytes / PAGE - 1;	/* last_page */
	memcpy(page + PAGE - 10, "SWAPSPACE2", 10);
	fd = open(ZRAM_DEV, O_WRONLY);
	ok = fd >= 0 && pwrite(fd, page, PAGE, 0) == (ssize_t)PAGE;
	if (fd >= 0)
		close(fd);
	free(page);
	return ok && !swapon(ZRAM_DEV, 0) ? 0 : -1;
}

static int cgroup_join(void)
{
	char line[512], dev[64], dir[256], type[64], mnt[256] = "";
	FILE *f = fopen("/proc/mounts", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %255s %63s", dev, dir, type) == 3 && !strcmp(type, "cgroup2"))
			snprintf(mnt, sizeof(mnt), "%s", dir);
	if (f)
		fclose(f);
	if (!mnt[0]) {
		snprintf(mnt, sizeof(mnt), "/tmp/reclaim-bench-cgroup");
		mkdir(mnt, 0755);
		if (mount("none", mnt, "cgroup2", 0, NULL))
			return -1;
	}
	if (write_at(mnt, "cgroup.subtree_control", "+memory"))
		return -1;
	snprintf(cg, sizeof(cg), "%s/reclaim-bench-%d", mnt, getpid());
	if (mkdir(cg, 0755) && errno != EEXIST)
		return -1;
	return write_at(cg, "cgroup.procs", "0");
}

/* The reference work: no memory beyond the stack, nothing reclaim can take, the same steps on every kernel. */
static uint64_t ref_work(void)
{
	uint64_t x = 88172645463325252ULL, t0 = now_ns();

	for (unsigned long i = 0; i < REF_ITERS; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	__asm__ volatile("" : : "r"(x));	/* the loop's result is used: it cannot be optimised away */
	return now_ns() - t0;
}

/* Fault in (or swap in) every page and give it its own bytes. */
static void fill(char *a, unsigned long pages, unsigned long round)
{
	for (unsigned long i = 0; i < pages; i++)
		for (unsigned long j = 0; j < PAGE; j += 512)
			*(unsigned long *)(a + i * PAGE + j) = (i * 7919 + j + round) | 1;
}

static void residency(const char *a, unsigned long pages, unsigned long *present, unsigned long *swapped)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	uint64_t e;

	*present = 0;
	*swapped = 0;
	for (unsigned long i = 0; fd >= 0 && i < pages; i++) {
		if (pread(fd, &e, sizeof(e), ((uintptr_t)a / PAGE + i) * sizeof(e)) != sizeof(e))
			break;
		*present += (e >> 63) & 1;
		*swapped += (e >> 62) & 1;
	}
	if (fd >= 0)
		close(fd);
}

static int reg(unsigned long start, unsigned long len, unsigned int flags)
{
	char line[128];

	snprintf(line, sizeof(line), "%d 0x%lx 0x%lx 0x%x 0 255\n", getpid(), start, len, flags);
	return write_file(MI "register", line);
}

/*
 * A child that holds one intent in an address space of its own until killed, so the static key stays on while
 * this process has none. Returns its pid, or -1.
 */
static pid_t keeper(void)
{
	int ready[2];
	char c = 0;
	pid_t pid;

	if (pipe(ready))
		return -1;
	pid = fork();
	if (pid == 0) {
		char *page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		char parent[sizeof(cg)];

		/* out of the measured cgroup, so that reclaim there never meets its pages */
		snprintf(parent, sizeof(parent), "%s", cg);
		*strrchr(parent, '/') = '\0';
		c = !write_at(parent, "cgroup.procs", "0") && page != MAP_FAILED &&
		    reg((unsigned long)page, PAGE, 0x2) == 0;
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	if (pid > 0 && (read(ready[0], &c, 1) != 1 || !c)) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		pid = -1;
	}
	close(ready[0]);
	return pid;
}

static void measure(const char *state, int r, char *arena, unsigned long pages, unsigned long crit)
{
	unsigned long scan0, steal0, present, swapped, cpresent = 0, cswapped = 0;
	char want[32];
	uint64_t t0, t1, ref;
	int err;

	snprintf(want, sizeof(want), "%lu", 2 * pages * PAGE);
	fill(arena, pages, r);
	scan0 = memstat("pgscan");
	steal0 = memstat("pgsteal");
	ref = ref_work();
	t0 = now_ns();
	err = write_at(cg, "memory.reclaim", want);
	t1 = now_ns();
	ref += ref_work();
	if (err && err != EAGAIN) {
		printf("reclaim_bench error memory.reclaim: %s\n", strerror(err));
		exit(1);
	}
	residency(arena + crit * PAGE, pages - crit, &present, &swapped);
	if (crit)
		residency(arena, crit, &cpresent, &cswapped);
	printf("reclaim_bench %s round=%d ns=%llu pgscan=%lu pgsteal=%lu swapped=%lu swapped_critical=%lu "
	       "present_critical=%lu ref_ns=%llu\n", state, r, (unsigned long long)(t1 - t0),
	       memstat("pgscan") - scan0, memstat("pgsteal") - steal0, swapped, cswapped, cpresent,
	       (unsigned long long)ref);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 5, mb = argc > 2 ? atoi(argv[2]) : 4, n = 0;
	unsigned long pages = (unsigned long)mb * (1 << 20) / PAGE;
	int feature = access(MI "register", W_OK) == 0;
	char *arena, *tags, me[16];
	pid_t keep = -1;

	if (rounds < 1 || mb < 1)
		return 2;
	if (swap_on()) {
		printf("reclaim_bench error no swap and no unused zram0\n");
		return 1;
	}
	if (cgroup_join()) {
		printf("reclaim_bench error cannot join a memory cgroup: %s\n", strerror(errno));
		return 1;
	}
	arena = mmap(NULL, pages * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	tags = mmap(NULL, 2 * MAX_RANGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (arena == MAP_FAILED || tags == MAP_FAILED || madvise(arena, pages * PAGE, MADV_NOHUGEPAGE))
		return 1;
	printf("reclaim_bench feature=%d arena_pages=%lu rounds=%d\n", feature, pages, rounds);
	fflush(stdout);
	for (int r = 0; r < WARMUP_ROUNDS; r++)
		measure("warmup", r, arena, pages, 0);
	for (int r = 0; r < rounds; r++)
		measure("off", r, arena, pages, 0);
	snprintf(me, sizeof(me), "%d", getpid());
	if (feature && (keep = keeper()) < 0) {
		printf("reclaim_bench error the keeper child could not register\n");
		return 1;
	}
	for (int r = 0; r < rounds; r++) {
		write_file(MI "clear", me);
		measure("empty", r, arena, pages, 0);
		n = 0;
		for (int i = 0; feature && i < MAX_RANGES; i++)
			n += reg((unsigned long)tags + 2 * i * PAGE, PAGE, 0x1) == 0;
		if (r == 0)
			printf("reclaim_bench ranges=%d\n", n);
		measure("on", r, arena, pages, 0);
	}
	if (feature) {
		/* Critical bytes are bounded by RLIMIT_MEMLOCK (8 MiB by default): half the arena may be more. */
		struct rlimit unlimited = { RLIM_INFINITY, RLIM_INFINITY };

		write_file(MI "clear", me);
		if (setrlimit(RLIMIT_MEMLOCK, &unlimited) || reg((unsigned long)arena, pages / 2 * PAGE, 0x1))
			return 1;
		for (int r = 0; r < rounds; r++)
			measure("critical", r, arena, pages, pages / 2);
		kill(keep, SIGKILL);
		waitpid(keep, NULL, 0);
	}
	return feature && n != MAX_RANGES;
}
