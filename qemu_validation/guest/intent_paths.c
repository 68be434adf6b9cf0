// SPDX-License-Identifier: GPL-2.0
/*
 * intent_paths: what two paths the mm_intent reference check may not see do to a latency-critical range, so the
 * documentation can say it per kernel from a run instead of from reading the source.
 *
 *   damos-vaddr  a kdamond of this program's own (virtual-address operations, this process as its target) with
 *                one DAMOS "pageout" scheme over an arena of PAGES untagged pages and PAGES critical ones
 *   damos-paddr  the same with physical-address operations over the arena's physical span
 *   ksm          KSM merges a critical range with a second critical range (every mapping critical) and a third
 *                critical range with an untagged one (one mapping outside), then memory.reclaim of the
 *                process's memory cgroup; kept_by_intents says what the reference check kept, pagemap what
 *                stayed (the usual rules may keep a shared page too)
 *   ksm-one-critical  the same with the first two ranges untagged, so that the pages the reference check keeps
 *                (kept_by_intents) can only be the mixed ones
 *
 * Each case prints one line "intent_paths <case> release=<uname -r> kept_by_intents=<n> <name>_present=<n>
 * <name>_swapped=<n> ..." (pages mm_intent's reference check kept during the case, from its stats; pagemap's
 * present and swapped pages of each range, PAGES each) and exits 0, or says on stderr which step failed
 * and exits 1 (2 for an unknown case). Swap is zram0, set up by the first case of a boot. Usage: intent_paths CASE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#define PAGES 128			/* per range */
#define MI "/sys/kernel/debug/mm_intent/"
#define DAMON "/sys/kernel/mm/damon/admin/kdamonds/"
#define CTX DAMON "0/contexts/0/"
#define KSM "/sys/kernel/mm/ksm/"
#define CG "/sys/fs/cgroup/"
#define ZRAM "/sys/block/zram0/"
#define ZRAM_BYTES (64UL << 20)
#define WAIT_S 120			/* guest seconds a case waits for DAMOS or ksmd to act */
#define SETTLE_S 5			/* passes DAMOS gets on the critical range once the untagged one is out */

static int fail(const char *what)
{
	fprintf(stderr, "intent_paths: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* Write @s to @path: 0, or -1 with errno set. */
static int put(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY), rc = -1;

	if (fd >= 0) {
		rc = write(fd, s, strlen(s)) < 0 ? -1 : 0;
		close(fd);
	}
	return rc;
}

static void must_put(const char *path, const char *s)
{
	if (put(path, s))
		fail(path);
}

static long get_long(const char *path)
{
	char buf[64] = "";
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n <= 0)
		fail(path);
	return atol(buf);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* An unused zram0 as swap: a version 1 swap header (what mkswap writes), then swapon(). */
static void zram_swap_on(void)
{
	char buf[32];
	char *page = calloc(1, PAGE);
	int fd;

	snprintf(buf, sizeof(buf), "%lu", ZRAM_BYTES);
	must_put(ZRAM "disksize", buf);
	*(uint32_t *)(page + 1024) = 1;
	*(uint32_t *)(page + 1028) = ZRAM_BYTES / PAGE - 1;
	memcpy(page + PAGE - 10, "SWAPSPACE2", 10);
	fd = open("/dev/zram0", O_WRONLY);
	if (fd < 0 || pwrite(fd, page, PAGE, 0) != (ssize_t)PAGE)
		fail("/dev/zram0");
	close(fd);
	free(page);
	if (swapon("/dev/zram0", 0))
		fail("swapon /dev/zram0");
}

/* @n fresh anonymous pages, small (no THP: KSM and DAMON see pages). */
static char *arena(unsigned long n)
{
	char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED || madvise(p, n * PAGE, MADV_NOHUGEPAGE))
		fail("mmap");
	return p;
}

/*
 * A fault adds its folio to a per-CPU batch, not yet to the LRU, and physical-address pageout isolates only
 * folios on the LRU: the last pages filled would stay behind for that reason alone. munmap() drains this CPU's
 * batch (unmap_region() calls lru_add_drain()).
 */
static void drain_lru_batch(void)
{
	char *p = arena(1);

	p[0] = 1;
	munmap(p, PAGE);
}

/* Each page of a range its own bytes; two ranges of one @seed hold the same bytes (what KSM merges). */
static void fill(char *p, unsigned long seed)
{
	for (unsigned long i = 0; i < PAGES; i++)
		for (unsigned long j = 0; j < PAGE; j += sizeof(long))
			*(long *)(p + i * PAGE + j) = (long)(seed * 1000003 + i * 7919 + j + 1);
}

static void critical(char *p)
{
	char line[128];

	snprintf(line, sizeof(line), "%d 0x%lx 0x%lx 0x1 0 255\n", getpid(), (unsigned long)p, PAGES * PAGE);
	must_put(MI "register", line);
}

/* pagemap of @p's PAGES pages: bit 63 present, bit 62 swapped, bits 0-54 the frame (root only). */
static void residency(char *p, unsigned long *present, unsigned long *swapped, unsigned long *lo, unsigned long *hi)
{
	int fd = open("/proc/self/pagemap", O_RDONLY);
	uint64_t e;

	*present = *swapped = 0;
	for (unsigned long i = 0; fd >= 0 && i < PAGES; i++) {
		if (pread(fd, &e, sizeof(e), ((uintptr_t)p / PAGE + i) * sizeof(e)) != sizeof(e))
			fail("pagemap");
		*present += e >> 63 & 1;
		*swapped += e >> 62 & 1;
		if (lo && e >> 63 & 1) {
			unsigned long pfn = e & ((1ULL << 55) - 1);

			*lo = pfn < *lo ? pfn : *lo;
			*hi = pfn > *hi ? pfn : *hi;
		}
	}
	if (fd < 0)
		fail("/proc/self/pagemap");
	close(fd);
}

/* protected_pages of mm_intent's stats: pages the reference check kept since boot. */
static long kept_pages(void)
{
	char line[128];
	long v = -1;
	FILE *f = fopen(MI "stats", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "protected_pages %ld", &v) == 1)
			break;
	if (!f || v < 0)
		fail(MI "stats");
	fclose(f);
	return v;
}

/* One line: the residency of each range and the pages the reference check kept since @kept0. */
static void report(const char *name, char **ranges, const char **names, int n, long kept0)
{
	struct utsname u;
	unsigned long present, swapped;

	uname(&u);
	printf("intent_paths %s release=%s kept_by_intents=%ld", name, u.release, kept_pages() - kept0);
	for (int i = 0; i < n; i++) {
		residency(ranges[i], &present, &swapped, NULL, NULL);
		printf(" %s_present=%lu %s_swapped=%lu", names[i], present, names[i], swapped);
	}
	printf("\n");
	fflush(stdout);
}

static void damon_range(const char *dir, const char *max)
{
	char path[160];

	snprintf(path, sizeof(path), CTX "schemes/0/access_pattern/%s/min", dir);
	must_put(path, "0");
	snprintf(path, sizeof(path), CTX "schemes/0/access_pattern/%s/max", dir);
	must_put(path, max);
}

/*
 * A kdamond with one target region [@start, @end) and a pageout scheme that matches every region however it
 * was accessed (the arena is not touched after it is filled; on 6.9+ physical pageout skips a page found young
 * once, then takes it).
 */
static void damon_start(const char *ops, unsigned long start, unsigned long end)
{
	char buf[32];

	must_put(DAMON "nr_kdamonds", "1");
	must_put(DAMON "0/contexts/nr_contexts", "1");
	must_put(CTX "operations", ops);
	must_put(CTX "monitoring_attrs/intervals/sample_us", "1000");
	must_put(CTX "monitoring_attrs/intervals/aggr_us", "20000");
	must_put(CTX "targets/nr_targets", "1");
	if (!strcmp(ops, "vaddr")) {
		snprintf(buf, sizeof(buf), "%d", getpid());
		must_put(CTX "targets/0/pid_target", buf);
	}
	must_put(CTX "targets/0/regions/nr_regions", "1");
	snprintf(buf, sizeof(buf), "%lu", start);
	must_put(CTX "targets/0/regions/0/start", buf);
	snprintf(buf, sizeof(buf), "%lu", end);
	must_put(CTX "targets/0/regions/0/end", buf);
	must_put(CTX "schemes/nr_schemes", "1");
	must_put(CTX "schemes/0/action", "pageout");
	damon_range("sz", "18446744073709551615");
	damon_range("nr_accesses", "4294967295");
	damon_range("age", "4294967295");
	must_put(DAMON "0/state", "on");
}

static void damos(const char *ops)
{
	char *a = arena(2 * PAGES), *ranges[] = { a, a + PAGES * PAGE };
	const char *names[] = { "untagged", "critical" };
	unsigned long present, swapped, lo = ~0UL, hi = 0, start = (unsigned long)a, end = start + 2 * PAGES * PAGE;
	long kept0 = kept_pages();
	char name[32];

	fill(ranges[0], 1);
	fill(ranges[1], 2);
	drain_lru_batch();
	critical(ranges[1]);
	if (!strcmp(ops, "paddr")) {
		residency(ranges[0], &present, &swapped, &lo, &hi);
		residency(ranges[1], &present, &swapped, &lo, &hi);
		start = lo * PAGE;
		end = (hi + 1) * PAGE;
	}
	damon_start(ops, start, end);
	/*
	 * Until DAMOS has paged out every untagged page (it does on every kernel), then up to SETTLE_S seconds
	 * more for the critical range (less once all of it is out), so that "kept" means kept over many passes.
	 */
	for (int t = 0, settle = -1; t < WAIT_S * 10 && settle < SETTLE_S * 10; t++, settle += settle >= 0) {
		residency(ranges[settle < 0 ? 0 : 1], &present, &swapped, NULL, NULL);
		if (swapped == PAGES && settle >= 0)
			break;
		if (swapped == PAGES)
			settle = 0;
		sleep_ms(100);
	}
	must_put(DAMON "0/state", "off");
	snprintf(name, sizeof(name), "damos-%s", ops);
	report(name, ranges, names, 2, kept0);
}

/* This process in a memory cgroup of its own (cgroup2 mounted if it is not), so memory.reclaim reclaims it. */
static void own_memcg(void)
{
	char procs[16];

	mkdir(CG, 0755);
	if (access(CG "cgroup.controllers", F_OK) && mount("none", CG, "cgroup2", 0, NULL))
		fail("mount cgroup2");
	must_put(CG "cgroup.subtree_control", "+memory");
	if (mkdir(CG "intent_paths", 0755) && errno != EEXIST)
		fail("mkdir " CG "intent_paths");
	snprintf(procs, sizeof(procs), "%d", getpid());
	must_put(CG "intent_paths/cgroup.procs", procs);
}

/*
 * Five ranges: merged_a and merged_b hold the same bytes, as do mixed_critical and mixed_untagged; untagged is
 * unique. mixed_critical is latency-critical; with @pair_critical so are merged_a and merged_b (every mapping of
 * their merged pages critical), without it they are untagged (the only critical mapping is mixed_critical's).
 */
static void ksm(int pair_critical)
{
	char *a = arena(5 * PAGES), *ranges[5];
	const char *names[] = { "merged_a", "merged_b", "mixed_critical", "mixed_untagged", "untagged" };
	const char *name = pair_critical ? "ksm" : "ksm-one-critical";
	long sharing = 0, kept0 = kept_pages();

	own_memcg();
	for (int i = 0; i < 5; i++)
		ranges[i] = a + i * PAGES * PAGE;
	if (madvise(a, 5 * PAGES * PAGE, MADV_MERGEABLE))
		fail("MADV_MERGEABLE");
	fill(ranges[0], 1);
	fill(ranges[1], 1);
	fill(ranges[2], 2);
	fill(ranges[3], 2);
	fill(ranges[4], 3);
	drain_lru_batch();
	if (pair_critical) {
		critical(ranges[0]);
		critical(ranges[1]);
	}
	critical(ranges[2]);
	must_put(KSM "pages_to_scan", "1000");
	must_put(KSM "sleep_millisecs", "10");
	must_put(KSM "run", "1");
	for (int t = 0; t < WAIT_S * 10 && sharing < 2 * PAGES; t++) {
		sleep_ms(100);
		sharing = get_long(KSM "pages_sharing");
	}
	must_put(KSM "run", "0");	/* merged pages stay merged; nothing unmerges or re-merges while reclaim runs */
	printf("intent_paths %s-merged pages_shared=%ld pages_sharing=%ld\n", name, get_long(KSM "pages_shared"),
	       sharing);
	/* a request larger than the cgroup: reclaim takes what it may and gives up (EAGAIN) on the rest */
	if (put(CG "intent_paths/memory.reclaim", "64M") && errno != EAGAIN)
		fail("memory.reclaim");
	report(name, ranges, names, 5, kept0);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: intent_paths damos-vaddr|damos-paddr|ksm\n");
		return 2;
	}
	if (strcmp(argv[1], "damos-vaddr") && strcmp(argv[1], "damos-paddr") && strcmp(argv[1], "ksm") &&
	    strcmp(argv[1], "ksm-one-critical")) {
		fprintf(stderr, "intent_paths: unknown case %s (damos-vaddr, damos-paddr, ksm, ksm-one-critical)\n",
			argv[1]);
		return 2;
	}
	if (access(MI "register", F_OK) && mount("none", "/sys/kernel/debug", "debugfs", 0, NULL))
		fail("mount debugfs");
	if (get_long(ZRAM "disksize") == 0)	/* an earlier case of this boot may have set it up */
		zram_swap_on();
	if (!strcmp(argv[1], "ksm") || !strcmp(argv[1], "ksm-one-critical"))
		ksm(!strcmp(argv[1], "ksm"));
	else
		damos(argv[1] + strlen("damos-"));
	return 0;
}
