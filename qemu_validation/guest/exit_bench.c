// SPDX-License-Identifier: GPL-2.0
/*
 * exit_bench: what mm_intent costs the process exit path. Times fork + exit + wait of a child that touches
 * one page, in three states of the registry, in this order ("unused" first, before anything registers):
 *   unused  nothing has been registered since boot
 *   one     one other process holds one intent
 *   many    HOLDERS other processes hold PER_HOLDER intents each
 * Then, with the holders still there (so the static key stays on), it times munmap() of one page, each in a
 * fresh child whose address space holds KEEP other intents or none:
 *   unmap_untagged  a page without an intent, KEEP intents elsewhere in the address space
 *   unmap_tagged    a page with its own intent, KEEP intents elsewhere (they are ranked again)
 *   unmap_last      a page with the address space's only intent (the space is detached)
 * Prints one line per state: "exit_bench <state> n=<N> median_ns=<..> p90_ns=<..> mean_ns=<..>", from raw
 * per-iteration samples. Usage: exit_bench [ITERATIONS]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REG "/sys/kernel/debug/mm_intent/register"
#define HOLDERS 256
#define PER_HOLDER 4
#define KEEP 256
#define PAGE 4096UL

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *state, uint64_t *s, int n)
{
	uint64_t sum = 0;

	for (int i = 0; i < n; i++)
		sum += s[i];
	qsort(s, n, sizeof(*s), cmp);
	printf("exit_bench %s n=%d median_ns=%llu p90_ns=%llu mean_ns=%llu\n", state, n,
	       (unsigned long long)s[n / 2], (unsigned long long)s[n * 9 / 10], (unsigned long long)(sum / n));
	fflush(stdout);
}

static void measure(const char *state, int n)
{
	uint64_t *s = calloc(n, sizeof(*s));
	char *page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		pid_t c = fork();

		if (c == 0) {
			page[0] = 1;
			_exit(0);
		}
		waitpid(c, NULL, 0);
		s[i] = now_ns() - t0;
	}
	report(state, s, n);
	munmap(page, PAGE);
	free(s);
}

/* Register `count` one-page intents for `pid` over its mapping at `base`; the number registered. */
static int hold(pid_t pid, unsigned long base, int count)
{
	int fd = open(REG, O_WRONLY), ok = 0;
	char line[128];

	for (int i = 0; i < count && fd >= 0; i++) {
		int len = snprintf(line, sizeof(line), "%d 0x%lx 0x1000 0x1 0 0\n", pid, base + i * 2 * PAGE);

		ok += write(fd, line, len) == len;
	}
	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * In a fresh child (its address space starts without intents): register `keep` intents on a mapping of its
 * own, then n times map a page, touch it, give it an intent when `tag`, and time munmap() of it alone.
 * Returns 1 when every registration succeeded (on a kernel without mm_intent none does), else 0.
 */
static int measure_unmap(const char *state, int n, int keep, int tag)
{
	int status = 0;
	pid_t c = fork();

	if (c == 0) {
		uint64_t *s = calloc(n, sizeof(*s));
		unsigned long kept = (unsigned long)mmap(NULL, 2 * (keep + 1) * PAGE, PROT_READ | PROT_WRITE,
							 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		int ok = hold(getpid(), kept, keep) == keep;

		for (int i = 0; i < n; i++) {
			char *page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			uint64_t t0;

			page[0] = 1;
			if (tag)
				ok &= hold(getpid(), (unsigned long)page, 1) == 1;
			t0 = now_ns();
			munmap(page, PAGE);
			s[i] = now_ns() - t0;
		}
		report(state, s, n);
		_exit(ok ? 0 : 1);
	}
	waitpid(c, &status, 0);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000, p[2], held = 0, unmapped = 0;
	unsigned long base = (unsigned long)mmap(NULL, 2 * PER_HOLDER * PAGE, PROT_READ | PROT_WRITE,
						 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pid_t kids[HOLDERS];

	if (n < 10 || pipe(p))
		return 2;
	measure("warmup", n / 4);
	measure("unused", n);
	held = hold(getpid(), base, 1);
	measure("one", n);
	for (int k = 0; k < HOLDERS; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			char c;

			close(p[1]);
			while (read(p[0], &c, 1) > 0)
				;
			_exit(0);
		}
		held += hold(kids[k], base, PER_HOLDER);
	}
	printf("exit_bench intents_held=%d processes_holding=%d\n", held, HOLDERS + 1);
	measure("many", n);
	unmapped += measure_unmap("unmap_untagged", n, KEEP, 0);
	unmapped += measure_unmap("unmap_tagged", n, KEEP, 1);
	unmapped += measure_unmap("unmap_last", n, 0, 1);
	printf("exit_bench unmap_registered=%d of 3\n", unmapped);
	close(p[1]);
	for (int k = 0; k < HOLDERS; k++)
		waitpid(kids[k], NULL, 0);
	return held == 1 + HOLDERS * PER_HOLDER && unmapped == 3 ? 0 : 1;
}
