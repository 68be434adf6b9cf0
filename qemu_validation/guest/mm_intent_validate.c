// SPDX-License-Identifier: GPL-2.0
/*
 * mm_intent_validate: checks the mm_intent debugfs interface from inside the guest and prints KTAP.
 *
 * Built static on the host by kvds (gcc -static) and placed in the initramfs, so it runs in the busybox guest
 * with no libraries. The random bad-input suite is a differential test: a reference model of the documented
 * parsing rules (including the kernel's kstrtox() quirks) predicts the errno of each malformed line, and the
 * kernel must return exactly that errno; random well-formed lines must be accepted and read back identically.
 * The model (mm_intent_model.c, compiled into the same binary) is checked against the kernel's own errno table
 * (mm/mm_intent_kunit.c, passed in with --table), and a concurrent phase races register, clear, lookup and dump
 * against processes that exit, exec and munmap.
 * Usage: mm_intent_validate [--fuzz N] [--valid N] [--seed S] [--concurrent SECONDS] [--table FILE] [--ktap FILE]
 *        mm_intent_validate --check-table FILE   (host: the model against the kernel's table, no kernel needed)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mm_intent_model.h"

#define DIR "/sys/kernel/debug/mm_intent"
#define MAX_ENTRIES 4096
#define MAX_PER_MM 1024
#define NTESTS 13

static FILE *ktap;
static int test_no;
static unsigned long malformed;

static void emit(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
	if (ktap) {
		va_start(ap, fmt);
		vfprintf(ktap, fmt, ap);
		va_end(ap);
		fflush(ktap);
	}
}

static int failures;
#define CHECK(cond, ...) do { if (!(cond)) { failures++; emit("# " __VA_ARGS__); emit("\n"); } } while (0)

static void result(const char *name, int fails)
{
	test_no++;
	if (fails)
		emit("not ok %d %s # %d check(s) failed\n", test_no, name, fails);
	else
		emit("ok %d %s\n", test_no, name);
}

static const char *ename(int e)
{
	const char *n = e ? strerrorname_np(e) : "OK";

	return n ? n : "E?";
}

/* Write one buffer to a debugfs file; 0 on success, else the errno. */
static int wr_fd(int fd, const void *buf, size_t n)
{
	ssize_t r = write(fd, buf, n);

	if (r == (ssize_t)n)
		return 0;
	return r < 0 ? errno : EIO;
}

static int wr(const char *file, const char *s)
{
	char path[128];
	int fd, err;

	snprintf(path, sizeof(path), DIR "/%s", file);
	fd = open(path, O_WRONLY);
	if (fd < 0)
		return errno;
	err = wr_fd(fd, s, strlen(s));
	close(fd);
	return err;
}

struct entry {
	int pid;
	unsigned long start, len;
	unsigned int flags, prio;
	unsigned long long deadline;
};

/* Parse the dump; returns the number of entries, or -1 on a malformed line. */
static int dump(struct entry *out, int max)
{
	char *text = read_all(DIR "/dump"), *line, *save = NULL;
	int n = 0;

	if (!text)
		return -1;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct entry e;
		int used = -1;

		if (sscanf(line, "%d 0x%lx 0x%lx 0x%x %llu %u%n", &e.pid, &e.start, &e.len, &e.flags,
			   &e.deadline, &e.prio, &used) != 6 || line[used] != '\0') {
			emit("# unparsable dump line: %s\n", line);
			free(text);
			return -1;
		}
		if (n < max)
			out[n] = e;
		n++;
	}
	free(text);
	return n;
}

static int count_pid(int pid)
{
	static struct entry es[MAX_ENTRIES + 8];
	int n = dump(es, MAX_ENTRIES + 8), c = 0;

	for (int i = 0; i < n && i < MAX_ENTRIES + 8; i++)
		c += es[i].pid == pid;
	return n < 0 ? -1 : c;
}

static int reg(int pid, unsigned long start, unsigned long len, unsigned int flags, unsigned long long dl,
	       unsigned int prio)
{
	char line[LINE_MAX_K + 1];

	snprintf(line, sizeof(line), "%d 0x%lx 0x%lx 0x%x %llu %u\n", pid, start, len, flags, dl, prio);
	return wr("register", line);
}

/* Lookup through one open file: 0 and the answer line, or the write's errno. */
static int lookup(int pid, unsigned long addr, char *answer, size_t size)
{
	char q[64];
	int fd = open(DIR "/lookup", O_RDWR), err;
	ssize_t r;

	if (fd < 0)
		return errno;
	snprintf(q, sizeof(q), "%d 0x%lx\n", pid, addr);
	err = wr_fd(fd, q, strlen(q));
	if (!err) {
		r = pread(fd, answer, size - 1, 0);
		answer[r > 0 ? r : 0] = '\0';
	}
	close(fd);
	return err;
}

static void *map_pages(unsigned long n, int prot)
{
	void *p = mmap(NULL, n * PAGE, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* ---- tests ---- */

static void t_interface(void)
{
	const char *files[] = { "register", "dump", "clear", "lookup" };

	failures = 0;
	for (int i = 0; i < 4; i++) {
		char p[128];

		snprintf(p, sizeof(p), DIR "/%s", files[i]);
		CHECK(access(p, F_OK) == 0, "missing %s", p);
	}
	CHECK(wr("clear", "all\n") == 0, "clear all failed");
	CHECK(count_pid(getpid()) == 0 && dump(NULL, 0) == 0, "registry not empty after clear all");
	result("interface_present", failures);
}

static unsigned long arena;     /* 64 pages owned by this process */
static struct entry want[8];

static void t_roundtrip(void)
{
	static const unsigned int flags[8] = { 0x1, 0x2, 0x4, 0x8, 0x10, 0x1f, 0x0, 0x5 };
	static const unsigned long long dls[8] = { 0, 1, 1000000, 18446744073709551615ULL, 42, 7, 123456789012ULL, 5 };
	struct entry got[16];
	int pid = getpid(), n, err;
	char line[LINE_MAX_K + 1];

	failures = 0;
	arena = (unsigned long)map_pages(64, PROT_READ | PROT_WRITE);
	CHECK(arena, "mmap failed");
	/* Registered out of address order: the dump must come back sorted by start. */
	for (int k = 0; k < 8; k++) {
		int i = (k * 5) % 8;

		want[i] = (struct entry){ pid, arena + i * 8 * PAGE, (1 + i % 3) * PAGE, flags[i], i * 37 % 256, dls[i] };
		want[i].prio = (i * 37) % 256;
		err = reg(pid, want[i].start, want[i].len, want[i].flags, want[i].deadline, want[i].prio);
		CHECK(err == 0, "register %d: %s", i, ename(err));
	}
	n = dump(got, 16);
	CHECK(n == 8, "dump has %d entries, want 8", n);
	for (int i = 0; i < 8 && i < n; i++) {
		CHECK(got[i].pid == want[i].pid, "entry %d pid: got %d want %d", i, got[i].pid, want[i].pid);
		CHECK(got[i].start == want[i].start, "entry %d start: got %#lx want %#lx", i, got[i].start, want[i].start);
		CHECK(got[i].len == want[i].len, "entry %d len: got %#lx want %#lx", i, got[i].len, want[i].len);
		CHECK(got[i].flags == want[i].flags, "entry %d flags: got %#x want %#x", i, got[i].flags, want[i].flags);
		CHECK(got[i].deadline == want[i].deadline, "entry %d deadline_ns: got %llu want %llu", i,
		      got[i].deadline, want[i].deadline);
		CHECK(got[i].prio == want[i].prio, "entry %d priority: got %u want %u", i, got[i].prio, want[i].prio);
	}
	/* A dump line is a register line: writing it back must hit the overlap rule, nothing else. */
	snprintf(line, sizeof(line), "%d 0x%lx 0x%lx 0x%x %llu %u\n", want[0].pid, want[0].start, want[0].len,
		 want[0].flags, want[0].deadline, want[0].prio);
	err = wr("register", line);
	CHECK(err == EEXIST, "dump line written back: %s, want EEXIST", ename(err));
	result("register_dump_roundtrip", failures);
}

static int wait_byte(int fd)
{
	char c;

	return read(fd, &c, 1) == 1 ? c : -1;
}

static void t_overlap(void)
{
	int pid = getpid(), err, before = count_pid(pid), p[2], q[2];
	pid_t child;

	failures = 0;
	/* want[1]: arena + 8 pages, 2 pages long; want[2]: arena + 16 pages, 3 pages long. */
	err = reg(pid, want[1].start + PAGE, PAGE, 1, 0, 0);
	CHECK(err == EEXIST, "range inside an entry: %s", ename(err));
	err = reg(pid, want[1].start - PAGE, 2 * PAGE, 1, 0, 0);
	CHECK(err == EEXIST, "range over an entry's first page: %s", ename(err));
	err = reg(pid, want[1].start, 16 * PAGE, 1, 0, 0);
	CHECK(err == EEXIST, "range spanning two entries: %s", ename(err));
	err = reg(pid, want[1].start + want[1].len, PAGE, 2, 0, 0);
	CHECK(err == 0, "adjacent range after an entry: %s", ename(err));
	err = reg(pid, want[1].start - PAGE, PAGE, 2, 0, 0);
	CHECK(err == 0, "adjacent range before an entry: %s", ename(err));
	CHECK(count_pid(pid) == before + 2, "dump has %d entries for us, want %d", count_pid(pid), before + 2);
	CHECK(wr("clear", "all\n") == 0, "clear");
	for (int i = 0; i < 8; i++)
		reg(pid, want[i].start, want[i].len, want[i].flags, want[i].deadline, want[i].prio);

	/* The same range in another address space never conflicts. */
	if (pipe(p) || pipe(q))
		CHECK(0, "pipe");
	child = fork();
	if (child == 0) {
		close(p[0]);
		close(q[1]);
		if (write(p[1], "r", 1) != 1)
			_exit(1);
		wait_byte(q[0]);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	wait_byte(p[0]);
	err = reg(child, want[0].start, want[0].len, 3, 0, 0);
	CHECK(err == 0, "same range for another process: %s", ename(err));
	CHECK(count_pid(child) == 1, "child entries: %d, want 1", count_pid(child));
	close(q[1]);
	waitpid(child, NULL, 0);
	close(p[0]);
	CHECK(count_pid(child) == 0, "child entries after its exit: %d, want 0", count_pid(child));
	result("overlap_rule", failures);
}

static void t_lookup(void)
{
	char ans[LINE_MAX_K + 1], exp[LINE_MAX_K + 1];
	int pid = getpid(), err, fd;

	failures = 0;
	for (int i = 0; i < 8; i++) {
		unsigned long probes[3] = { want[i].start, want[i].start + want[i].len / 2, want[i].start + want[i].len - 1 };

		snprintf(exp, sizeof(exp), "%d 0x%lx 0x%lx 0x%x %llu %u\n", pid, want[i].start, want[i].len,
			 want[i].flags, want[i].deadline, want[i].prio);
		for (int j = 0; j < 3; j++) {
			err = lookup(pid, probes[j], ans, sizeof(ans));
			CHECK(err == 0 && !strcmp(ans, exp), "lookup %#lx (entry %d): %s %s", probes[j], i, ename(err),
			      err ? "" : ans);
		}
		err = lookup(pid, want[i].start + want[i].len, ans, sizeof(ans));
		CHECK(err == ENOENT, "lookup just past entry %d: %s, want ENOENT", i, ename(err));
	}
	err = lookup(1, want[0].start, ans, sizeof(ans));
	CHECK(err == ENOENT, "lookup of another process's address: %s, want ENOENT", ename(err));
	err = lookup(999999, want[0].start, ans, sizeof(ans));
	CHECK(err == ESRCH, "lookup for a missing pid: %s, want ESRCH", ename(err));
	fd = open(DIR "/lookup", O_RDWR);
	CHECK(fd >= 0, "open lookup");
	{
		static const struct { const char *q; int err; } bad[] = {
			{ "1\n", EINVAL }, { "1 zz\n", EINVAL }, { "1 0x1000 5\n", EBADMSG }, { "1 0x1000\n\n", EBADMSG },
			{ "x 0x1000\n", EINVAL }, { "", 0 },
		};
		char big[300];

		for (int i = 0; bad[i].q[0]; i++) {
			err = wr_fd(fd, bad[i].q, strlen(bad[i].q));
			CHECK(err == bad[i].err, "lookup %s: %s, want %s", bad[i].q, ename(err), ename(bad[i].err));
		}
		memset(big, ' ', sizeof(big));
		err = wr_fd(fd, big, sizeof(big));
		CHECK(err == E2BIG, "overlong lookup: %s", ename(err));
	}
	close(fd);
	result("lookup_attribution", failures);
}

/* The start of a process's first mapping (an address register accepts for it). */
static unsigned long first_mapping(int pid)
{
	char path[64], *text;
	unsigned long lo = 0;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	text = read_all(path);
	if (text && sscanf(text, "%lx-", &lo) != 1)
		lo = 0;
	free(text);
	return lo;
}

static void t_clear(void)
{
	int pid = getpid(), err;
	char big[200];

	failures = 0;
	err = reg(1, first_mapping(1), PAGE, 0x10, 5, 1);
	CHECK(err == 0, "register for init: %s", ename(err));
	err = wr("clear", "999999\n");
	CHECK(err == ESRCH, "clear missing pid: %s", ename(err));
	CHECK(wr("clear", "\n") == EINVAL, "clear empty line");
	CHECK(wr("clear", "al\n") == EINVAL, "clear 'al'");
	CHECK(wr("clear", "all all\n") == EBADMSG, "clear 'all all'");
	CHECK(wr("clear", "all\n\n") == EBADMSG, "clear 'all' + blank line");
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	CHECK(wr("clear", big) == E2BIG, "clear overlong");
	CHECK(count_pid(pid) == 8 && count_pid(1) == 1, "bad clears changed the registry");
	{
		char me[32];

		snprintf(me, sizeof(me), "%d\n", pid);
		err = wr("clear", me);
	}
	CHECK(err == 0, "clear own pid: %s", ename(err));
	CHECK(count_pid(pid) == 0, "own entries left after clear <pid>: %d", count_pid(pid));
	CHECK(count_pid(1) == 1, "clear <pid> removed another process's entry");
	CHECK(wr("clear", "1") == 0 && count_pid(1) == 0, "clear 1");
	result("clear", failures);
}

static void t_exit_cleanup(void)
{
	int p[2], q[2], total;
	pid_t child;

	failures = 0;
	total = dump(NULL, 0);
	if (pipe(p) || pipe(q))
		CHECK(0, "pipe");
	child = fork();
	if (child == 0) {
		unsigned long a = (unsigned long)map_pages(8, PROT_READ | PROT_WRITE);
		int ok = 1;

		close(p[0]);
		close(q[1]);
		for (int i = 0; i < 3; i++)
			ok &= reg(getpid(), a + 2 * i * PAGE, PAGE, 0x2, 100 + i, i) == 0;
		if (write(p[1], ok ? "r" : "f", 1) != 1)
			_exit(1);
		wait_byte(q[0]);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	CHECK(wait_byte(p[0]) == 'r', "child could not register its own ranges");
	CHECK(count_pid(child) == 3, "child entries while alive: %d, want 3", count_pid(child));
	close(q[1]);
	waitpid(child, NULL, 0);
	close(p[0]);
	CHECK(count_pid(child) == 0, "child entries after exit: %d, want 0", count_pid(child));
	CHECK(dump(NULL, 0) == total, "registry size %d after child exit, want %d", dump(NULL, 0), total);

	/* exec replaces the address space: the entries go although the pid lives on. */
	if (pipe2(p, O_CLOEXEC))
		CHECK(0, "pipe2");
	child = fork();
	if (child == 0) {
		unsigned long a = (unsigned long)map_pages(2, PROT_READ | PROT_WRITE);
		int ok = reg(getpid(), a, PAGE, 0x4, 1, 1) == 0;

		close(p[0]);
		if (write(p[1], ok ? "r" : "f", 1) != 1)
			_exit(1);
		execl("/bin/busybox", "sleep", "60", (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	CHECK(wait_byte(p[0]) == 'r', "exec child could not register");
	CHECK(wait_byte(p[0]) == -1, "no EOF: exec did not happen");   /* write end closed by exec */
	close(p[0]);
	CHECK(kill(child, 0) == 0, "exec child is gone");
	CHECK(count_pid(child) == 0, "entries survived exec: %d", count_pid(child));
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	result("exit_and_exec_cleanup", failures);
}

/* A child that registers `n` one-page entries for itself, reports the errno of entry n + 1, and waits. */
static pid_t bound_child(int n, int *status_fd, int *go_fd)
{
	int p[2], q[2];
	pid_t child;

	if (pipe(p) || pipe(q))
		return -1;
	child = fork();
	if (child == 0) {
		unsigned long a = (unsigned long)map_pages(n + 1, PROT_NONE);
		int fd = open(DIR "/register", O_WRONLY), err = 0, i;
		char line[LINE_MAX_K + 1], c;

		/* Only its own pipe ends: an inherited write end of an earlier child's pipe would keep that child
		 * waiting for an EOF that never comes. */
		for (int f = 3; f < 1024; f++)
			if (f != p[1] && f != q[0] && f != fd)
				close(f);
		for (i = 0; i < n && !err; i++) {
			snprintf(line, sizeof(line), "%d 0x%lx 0x1000 0x1 %d 0\n", getpid(), a + i * PAGE, i);
			err = wr_fd(fd, line, strlen(line));
		}
		c = err ? 'f' : 'r';
		if (!err) {
			snprintf(line, sizeof(line), "%d 0x%lx 0x1000 0x1 0 0\n", getpid(), a + n * PAGE);
			err = wr_fd(fd, line, strlen(line));
			c = err == EDQUOT ? 'q' : err == ENOSPC ? 's' : err == 0 ? '0' : 'x';
		}
		if (write(p[1], &c, 1) != 1)
			_exit(1);
		wait_byte(q[0]);
		_exit(0);
	}
	close(p[1]);
	close(q[0]);
	*status_fd = p[0];
	*go_fd = q[1];
	return child;
}

static void t_bound(void)
{
	int pid = getpid(), err, st[4], go[4], nproc = MAX_ENTRIES / MAX_PER_MM;
	pid_t kids[4];
	char line[LINE_MAX_K + 1];

	failures = 0;
	CHECK(wr("clear", "all") == 0, "clear");
	/* One address space holds at most MAX_PER_MM entries (EDQUOT), the registry MAX_ENTRIES (ENOSPC). */
	for (int k = 0; k < nproc; k++) {
		kids[k] = bound_child(MAX_PER_MM, &st[k], &go[k]);
		err = wait_byte(st[k]);
		CHECK(err == (k < nproc - 1 ? 'q' : 's'), "process %d: filling to %d then one more gave '%c'", k,
		      MAX_PER_MM, err);
	}
	CHECK(dump(NULL, 0) == MAX_ENTRIES, "dump has %d entries, want %d", dump(NULL, 0), MAX_ENTRIES);
	snprintf(line, sizeof(line), "%d 0x%lx 0x1000 0x1 0 0\n", pid, arena);
	err = wr("register", line);
	CHECK(err == ENOSPC, "entry %d: %s, want ENOSPC", MAX_ENTRIES + 1, ename(err));
	for (int k = 0; k < nproc; k++) {
		close(go[k]);
		waitpid(kids[k], NULL, 0);
		close(st[k]);
	}
	CHECK(dump(NULL, 0) == 0, "%d entries left after the %d full processes exited", dump(NULL, 0), nproc);
	result("bounded_registry", failures);
}

/* ---- bad input ---- */

struct badcase {
	char line[LINE_MAX_K * 40];
	size_t len;
	int err;
};

static void print_line(const char *what, const unsigned char *b, size_t n, int want, int got)
{
	char esc[400];
	size_t o = 0;

	for (size_t i = 0; i < n && o < sizeof(esc) - 5; i++)
		o += snprintf(esc + o, sizeof(esc) - o, (b[i] >= 0x20 && b[i] < 0x7f && b[i] != '\\') ? "%c" : "\\x%02x",
			      b[i]);
	esc[o] = '\0';
	emit("# %s: \"%s\" (%zu bytes): want %s, got %s\n", what, esc, n, ename(want), ename(got));
}

static void *thread_fn(void *arg)
{
	*(int *)arg = syscall(SYS_gettid);
	return NULL;
}

static void t_errno_table(void)
{
	static struct badcase c[80];
	int pid = getpid(), nc = 0, fd, err, tid = 0, model_wrong = 0, before;
	unsigned long b = arena, hole = (unsigned long)map_pages(3, PROT_READ);
	pthread_t th;

	failures = 0;
	if (hole)
		munmap((void *)(hole + PAGE), PAGE);
	pthread_create(&th, NULL, thread_fn, &tid);
	pthread_join(th, NULL); /* the tid is gone now: a gone thread and a live one both have no tgid of their own */
#define ADD(e, ...) do { c[nc].len = snprintf(c[nc].line, sizeof(c[nc].line), __VA_ARGS__); c[nc++].err = e; } while (0)
	ADD(EBADMSG, "%d 0x%lx 0x1000 0x1 0 0 extra\n", pid, b + PAGE);
	ADD(EBADMSG, "%d 0x%lx 0x1000 0x1 0 0\n\n", pid, b + PAGE);
	ADD(EBADMSG, "%d 0x%lx 0x1000 0x1 0 0\nX", pid, b + PAGE);
	ADD(EBADMSG, "%d 0x%lx 0x1000 0x1 0 0 0 0\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0x%lx 0x1000 0x1 0\n", pid, b + PAGE);
	ADD(EINVAL, "\n");
	ADD(EINVAL, "      \n");
	ADD(EINVAL, "abc 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(EINVAL, "0x%x 0x%lx 0x1000 0x1 0 0\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0xg000 0x1000 0x1 0 0\n", pid);
	ADD(EINVAL, "%d -0x1000 0x1000 0x1 0 0\n", pid);
	ADD(EINVAL, "%d 0x%lxz 0x1000 0x1 0 0\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0x 0x1000 0x1 0 0\n", pid);
	ADD(EINVAL, "%d 0x%lx 0x1000 0x1 -1 0\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0x%lx 0x1000 0x1 18446744073709551616 0\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0x%lx 0x1000 0x1 1e9 0\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0x%lx 0x1000 0x1 0 256\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0x%lx 0x1000 0x1 0 -1\n", pid, b + PAGE);
	ADD(EINVAL, "%d 0x%lx 0x1000 0x1 0 0x10\n", pid, b + PAGE);
	ADD(EINVAL, "%d\t0x%lx 0x1000 0x1 0 0\n", pid, b + PAGE);
	ADD(EINVAL, "99999999999 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(EOPNOTSUPP, "%d 0x%lx 0x1000 0x20 0 0\n", pid, b + PAGE);
	ADD(EOPNOTSUPP, "%d 0x%lx 0x1000 0x40 0 0\n", pid, b + PAGE);
	ADD(EOPNOTSUPP, "%d 0x%lx 0x1000 0xffffffff 0 0\n", pid, b + PAGE);
	ADD(EOPNOTSUPP, "%d 0x%lx 0x1000 100000000 0 0\n", pid, b + PAGE);
	ADD(ERANGE, "%d 0x%lx 0 0x1 0 0\n", pid, b + PAGE);
	ADD(ERANGE, "%d 0x%lx 0x0 0x1 0 0\n", pid, b + PAGE);
	ADD(ERANGE, "%d 0xfffffffffffff000 0x2000 0x1 0 0\n", pid);
	ADD(ERANGE, "%d 0x%lx 10000000000000000 0x1 0 0\n", pid, b + PAGE);
	ADD(ERANGE, "%d 10000000000000000 0x1000 0x1 0 0\n", pid);
	ADD(ERANGE, "%d 0x%lx 0x1000 0x1 0 0\n", pid, TASK_SIZE_MAX_4L);
	ADD(ERANGE, "%d 0x1000 0x%lx 0x1 0 0\n", pid, TASK_SIZE_MAX_4L);
	ADD(EDOM, "%d 0x%lx 0x1000 0x1 0 0\n", pid, b + PAGE + 1);
	ADD(EDOM, "%d 0x%lx 0x1001 0x1 0 0\n", pid, b + PAGE);
	ADD(EDOM, "%d 0x%lx 0x800 0x1 0 0\n", pid, b + PAGE);
	ADD(ESRCH, "999999 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(EINVAL, "0 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(EINVAL, "-5 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(EINVAL, "pidfd:-1 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(EBADF, "pidfd:999 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(EBADF, "pidfd:%d 0x%lx 0x1000 0x1 0 0\n", fileno(stdout), b + PAGE);
	ADD(ENOMEM, "%d 0x1000 0x1000 0x1 0 0\n", pid);
	ADD(ENOMEM, "%d 0x%lx 0x3000 0x1 0 0\n", pid, hole);        /* a hole between two mapped pages */
	ADD(ENOMEM, "%d 0x%lx 0x1000 0x1 0 0\n", pid, hole + PAGE);
	ADD(ESRCH, "2 0x%lx 0x1000 0x1 0 0\n", b + PAGE);
	ADD(ESRCH, "%d 0x%lx 0x1000 0x1 0 0\n", tid, b + PAGE);
	ADD(EEXIST, "%d 0x%lx 0x%lx 0x1 0 0\n", pid, want[0].start, PAGE);
	ADD(EEXIST, "%d 0x%lx 0x%lx 0x1 0 0\n", pid, want[1].start - PAGE, 2 * PAGE);
	/* Overlong lines, and a NUL inside the line. */
	c[nc].len = LINE_MAX_K + 1;
	memset(c[nc].line, ' ', c[nc].len);
	c[nc++].err = E2BIG;
	c[nc].len = 4096;
	memset(c[nc].line, '1', c[nc].len);
	c[nc++].err = E2BIG;
	c[nc].len = snprintf(c[nc].line, sizeof(c[nc].line), "%d 0x%lx 0x1000 0x1 0 0\n", pid, b + PAGE);
	c[nc].line[3] = '\0';
	c[nc++].err = EINVAL;
#undef ADD
	for (int i = 0; i < 8; i++)
		reg(pid, want[i].start, want[i].len, want[i].flags, want[i].deadline, want[i].prio);
	before = dump(NULL, 0);
	fd = open(DIR "/register", O_WRONLY);
	for (int i = 0; i < nc; i++) {
		int model = c[i].err == EEXIST ? EEXIST : model_register((unsigned char *)c[i].line, c[i].len);

		err = wr_fd(fd, c[i].line, c[i].len);
		malformed++;
		if (err != c[i].err) {
			failures++;
			print_line("wrong errno", (unsigned char *)c[i].line, c[i].len, c[i].err, err);
		}
		if (model != c[i].err) {
			model_wrong++;
			print_line("model disagrees with table", (unsigned char *)c[i].line, c[i].len, c[i].err, model);
		}
	}
	close(fd);
	CHECK(dump(NULL, 0) == before, "malformed writes changed the registry: %d entries, want %d", dump(NULL, 0),
	      before);
	CHECK(model_wrong == 0, "the reference model disagrees with %d table rows", model_wrong);
	emit("# kvds: malformed_writes=%d\n", nc);
	result("errno_table", failures);
}

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static const char *const interesting[] = {
	"0", "-1", "+1", "-0", "0x", "0x0", "0X1000", "ffffffffffffffff", "10000000000000000", "0xffffffffffffffff",
	"1000", "fff", "1001", "7ffffffff000", "800000000000", "1f", "20", "ffffffff", "100000000", "255", "256",
	"18446744073709551615", "18446744073709551616", "2147483647", "2147483648", "-2147483648", "abc", "1e3",
	"0x1000z", "1", "2", "999999", "+0x1000", "00000000000000000000001000", "\t1", "1 2", "all",
	"pidfd:0", "pidfd:1", "pidfd:3", "pidfd:-1", "pidfd:", "pidfd:999",
};

/* One random line that the model calls malformed; returns its length. */
static size_t gen_bad(unsigned char *out, size_t cap, int pid, unsigned long base)
{
	for (;;) {
		char toks[8][64];
		size_t n = 0;
		int nt = 6, ops = 1 + rnd() % 3;

		if (rnd() % 16 == 0) { /* random bytes */
			n = 1 + rnd() % 200;
			for (size_t i = 0; i < n; i++)
				out[i] = rnd() % (rnd() % 2 ? 256 : 96) + (rnd() % 2 ? 0 : 32);
		} else {
			snprintf(toks[0], 64, "%d", pid);
			snprintf(toks[1], 64, "0x%lx", base + (rnd() % 64) * PAGE);
			snprintf(toks[2], 64, "0x%lx", (1 + rnd() % 4) * PAGE);
			snprintf(toks[3], 64, "0x%x", (unsigned int)(rnd() % 32));
			snprintf(toks[4], 64, "%llu", (unsigned long long)(rnd() % 1000000000));
			snprintf(toks[5], 64, "%u", (unsigned int)(rnd() % 256));
			for (int k = 0; k < ops; k++) {
				int t = rnd() % 6;

				switch (rnd() % 4) {
				case 0:
					snprintf(toks[t], 64, "%s", interesting[rnd() % (sizeof(interesting) / sizeof(*interesting))]);
					break;
				case 1:
					if (nt < 8)
						snprintf(toks[nt++], 64, "%s",
							 interesting[rnd() % (sizeof(interesting) / sizeof(*interesting))]);
					break;
				case 2:
					nt = rnd() % 6;
					break;
				default:
					snprintf(toks[t], 64, "%llx", (unsigned long long)rnd() >> (rnd() % 64));
				}
			}
			for (int t = 0; t < nt; t++)
				n += snprintf((char *)out + n, cap - n, "%s%s", t ? " " : "", toks[t]);
			if (rnd() % 2)
				out[n++] = '\n';
			/* Byte-level damage: replace, insert, delete, or pad. */
			for (int k = rnd() % 3; k > 0 && n > 0; k--) {
				size_t at = rnd() % n;

				switch (rnd() % 5) {
				case 0:
					out[at] = rnd() % 256;
					break;
				case 1:
					memmove(out + at + 1, out + at, n - at);
					out[at] = "\n \t\0x-+0"[rnd() % 8];
					n++;
					break;
				case 2:
					memmove(out + at, out + at + 1, n - at - 1);
					n--;
					break;
				case 3:
					while (n < cap && rnd() % 40)
						out[n++] = ' ';
					break;
				default:
					memcpy(out + n, out, n < cap - n ? n : cap - n);
					n += n < cap - n ? n : cap - n;
				}
			}
		}
		if (n > 0 && n <= cap && model_register(out, n) != 0)
			return n;
	}
}

static void t_fuzz(long count, uint64_t seed)
{
	static unsigned char line[1024];
	int pid = getpid(), fd = open(DIR "/register", O_WRONLY), shown = 0, before = dump(NULL, 0);
	static const int errs[] = { E2BIG, EBADMSG, EINVAL, EOPNOTSUPP, ERANGE, EDOM, EBADF, ESRCH, ENOMEM };
	long mismatches = 0, hist[9] = { 0 };
	struct timespec t0, t1;

	failures = 0;
	rng = seed ? seed : 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < count; i++) {
		size_t n = gen_bad(line, 600, pid, arena);
		int expect = model_register(line, n), got = wr_fd(fd, line, n);

		for (int k = 0; k < 9; k++)
			hist[k] += expect == errs[k];

		if (got != expect) {
			mismatches++;
			if (shown++ < 20)
				print_line("mismatch", line, n, expect, got);
			if (!got) { /* accepted a line it should not have: put the registry back */
				wr("clear", "all");
				for (int j = 0; j < 8; j++)
					reg(pid, want[j].start, want[j].len, want[j].flags, want[j].deadline, want[j].prio);
			}
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(fd);
	malformed += count;
	CHECK(mismatches == 0, "%ld of %ld random malformed writes got the wrong errno", mismatches, count);
	CHECK(dump(NULL, 0) == before, "random malformed writes changed the registry");
	emit("# kvds: fuzz_E2BIG=%ld fuzz_EBADMSG=%ld fuzz_EINVAL=%ld fuzz_EOPNOTSUPP=%ld fuzz_ERANGE=%ld fuzz_EDOM=%ld "
	     "fuzz_EBADF=%ld fuzz_ESRCH=%ld fuzz_ENOMEM=%ld\n", hist[0], hist[1], hist[2], hist[3], hist[4], hist[5],
	     hist[6], hist[7], hist[8]);
	emit("# kvds: malformed_writes=%ld mismatches=%ld fuzz_ms=%ld seed=%llu\n", count, mismatches,
	     (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000), (unsigned long long)seed);
	result("random_malformed_writes", failures);
}

/* ---- the kernel's own errno table (mm/mm_intent_kunit.c), one row a line: "<errno> <line as hex>" ---- */

struct trow {
	unsigned char line[LINE_MAX_K * 2];
	size_t len;
	int err;
};

static int load_table(const char *path, struct trow *rows, int max)
{
	char *text = read_all(path), *line, *save = NULL;
	int n = 0;

	if (!text)
		return -1;
	for (line = strtok_r(text, "\n", &save); line && n < max; line = strtok_r(NULL, "\n", &save)) {
		char *hex = strchr(line, ' ');
		size_t len = 0;

		rows[n].err = atoi(line);
		if (hex && strcmp(hex + 1, "-"))
			for (hex++; hex[0] && hex[1] && len < sizeof(rows[n].line); hex += 2)
				sscanf(hex, "%2hhx", &rows[n].line[len++]);
		rows[n++].len = len;
	}
	free(text);
	return n;
}

/* The model's parse-level answer for every row; the kernel's answer too when `kernel` (rows it must refuse). */
static int check_table(const char *path, int kernel)
{
	static struct trow rows[256];
	int n = load_table(path, rows, 256), bad = 0, fd = kernel ? open(DIR "/register", O_WRONLY) : -1;
	struct mreq r;

	if (n <= 0) {
		emit("# cannot read the kernel's errno table %s\n", path);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		int model = model_parse(rows[i].line, rows[i].len, &r), got;

		if (model != rows[i].err) {
			bad++;
			print_line("model disagrees with the kernel's table", rows[i].line, rows[i].len, rows[i].err,
				   model);
		}
		if (kernel && rows[i].err) {
			got = wr_fd(fd, rows[i].line, rows[i].len);
			malformed++;
			if (got != rows[i].err) {
				bad++;
				print_line("kernel disagrees with its own table", rows[i].line, rows[i].len,
					   rows[i].err, got);
			}
		}
	}
	if (fd >= 0)
		close(fd);
	emit("# kvds: kernel_table_rows=%d\n", n);
	return bad;
}

static void t_kernel_table(const char *path)
{
	failures = 0;
	if (!path)
		CHECK(0, "no --table: the kernel's errno table was not passed in");
	else
		failures += check_table(path, 1);
	result("kernel_errno_table", failures);
}

/* ---- well-formed lines: accepted, and read back in the canonical form ---- */

static const char *pick(const char *const *v, size_t n)
{
	return v[rnd() % n];
}

/* A random well-formed line for `target` over [start, start + len); the canonical dump line goes to `canon`. */
static size_t gen_good(char *out, size_t cap, const char *target, int pid, unsigned long start, unsigned long len,
		       char *canon, size_t ccap)
{
	static const char *const sp[] = { " ", " ", " ", "  ", "   " };
	static const char *const hexpre[] = { "0x", "0x", "0X", "", "+0x", "+" };
	unsigned int flags = rnd() % 32, prio = rnd() % 256;
	unsigned long long dl = rnd() % 4 == 0 ? 0 : rnd() >> (rnd() % 64);
	char zs[8] = "";
	size_t n;
	int upper = rnd() % 4 == 0;

	if (rnd() % 4 == 0)
		snprintf(zs, sizeof(zs), "%.*s", (int)(rnd() % 4), "000");
	n = 0;
	n += snprintf(out + n, cap - n, "%s%s%s", rnd() % 4 ? "" : " ", target, pick(sp, 5));
	n += snprintf(out + n, cap - n, upper ? "%s%s%lX%s" : "%s%s%lx%s", pick(hexpre, 6), zs, start, pick(sp, 5));
	n += snprintf(out + n, cap - n, upper ? "%s%lX%s" : "%s%lx%s", pick(hexpre, 6), len, pick(sp, 5));
	n += snprintf(out + n, cap - n, "%s%x%s", pick(hexpre, 6), flags, pick(sp, 5));
	n += snprintf(out + n, cap - n, "%s%llu%s", rnd() % 8 ? "" : "+", dl, pick(sp, 5));
	n += snprintf(out + n, cap - n, "%s%u%s%s", rnd() % 8 ? "" : "0", prio, rnd() % 4 ? "" : " ",
		      rnd() % 2 ? "\n" : "");
	snprintf(canon, ccap, "%d 0x%lx 0x%lx 0x%x %llu %u\n", pid, start, len, flags, dl, prio);
	return n;
}

static void t_valid(long count)
{
	int p[2], fd = open(DIR "/register", O_WRONLY), lk = open(DIR "/lookup", O_RDWR), cl = open(DIR "/clear", O_WRONLY);
	int pidfd, shown = 0, me_len;
	struct mreq req;
	unsigned long area = (unsigned long)map_pages(64, PROT_READ | PROT_WRITE);
	long rejected = 0, wrong = 0, model_wrong = 0, via_pidfd = 0;
	char line[LINE_MAX_K * 2], canon[LINE_MAX_K + 1], ans[LINE_MAX_K + 1], target[32], me[32];
	struct timespec t0, t1;
	pid_t holder;

	failures = 0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (pipe(p))
		CHECK(0, "pipe");
	holder = fork();     /* the target: a process with its own copy of `area` */
	if (holder == 0) {
		close(p[1]);
		wait_byte(p[0]);
		_exit(0);
	}
	close(p[0]);
	pidfd = syscall(SYS_pidfd_open, holder, 0);
	CHECK(pidfd >= 0 && fd >= 0 && area, "setup: pidfd_open %d", pidfd);
	me_len = snprintf(me, sizeof(me), "%d\n", holder);
	for (long i = 0; i < count && pidfd >= 0; i++) {
		unsigned long pg = rnd() % 60, len = (1 + rnd() % 4) * PAGE;
		size_t n;
		int err, model;

		if (rnd() % 8 == 0) {
			snprintf(target, sizeof(target), "pidfd:%d", pidfd);
			via_pidfd++;
		} else {
			snprintf(target, sizeof(target), "%s%d", rnd() % 8 ? "" : "+", holder);
		}
		n = gen_good(line, LINE_MAX_K + 1, target, holder, area + pg * PAGE, len, canon, sizeof(canon));
		if (n > LINE_MAX_K)
			n = snprintf(line, sizeof(line), "%s", canon);
		/* The parse-level model: the target (a live holder, the whole range mapped) is valid by construction,
		 * and reading its /proc files for every line would cost more than the write. */
		model = model_parse((unsigned char *)line, n, &req);
		err = wr_fd(fd, line, n);
		if (model) {
			model_wrong++;
			if (shown++ < 10)
				print_line("model rejects a well-formed line", (unsigned char *)line, n, 0, model);
		}
		if (err) {
			rejected++;
			if (shown++ < 10)
				print_line("well-formed line refused", (unsigned char *)line, n, 0, err);
			continue;
		}
		{
			char q[64];
			int qn = snprintf(q, sizeof(q), "%d 0x%lx\n", holder, area + pg * PAGE + len - 1);
			ssize_t r;

			err = wr_fd(lk, q, qn);
			r = err ? 0 : pread(lk, ans, sizeof(ans) - 1, 0);
			ans[r > 0 ? r : 0] = '\0';
		}
		if (err || strcmp(ans, canon)) {
			wrong++;
			if (shown++ < 10)
				emit("# read back %s: got \"%s\" want \"%s\"\n", ename(err), err ? "" : ans, canon);
		}
		CHECK(wr_fd(cl, me, me_len) == 0, "clear the holder");
	}
	close(lk);
	close(cl);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	close(p[1]);
	waitpid(holder, NULL, 0);
	if (pidfd >= 0)
		close(pidfd);
	close(fd);
	CHECK(rejected == 0, "%ld of %ld well-formed lines were refused", rejected, count);
	CHECK(wrong == 0, "%ld accepted lines did not read back in the canonical form", wrong);
	CHECK(model_wrong == 0, "the model rejected %ld well-formed lines", model_wrong);
	emit("# kvds: valid_writes=%ld valid_via_pidfd=%ld valid_ms=%ld\n", count, via_pidfd,
	     (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	result("random_valid_writes", failures);
}

/* ---- concurrency: register/clear/lookup/dump racing processes that exit, exec and unmap ---- */

#define CC_SLOTS 16
#define CC_PAGES 16
static volatile int cc_stop;
static int cc_pids[CC_SLOTS];          /* live (or just exited) children, written by the spawner */
static unsigned long cc_area;          /* mapped before each fork: every child has it at this address */
static long cc_ops, cc_unexpected, cc_ebusy;
static pthread_mutex_t cc_mu = PTHREAD_MUTEX_INITIALIZER;

static void cc_note(const char *what, int err)
{
	pthread_mutex_lock(&cc_mu);
	if (cc_unexpected++ < 10)
		emit("# concurrent %s: unexpected %s\n", what, ename(err));
	pthread_mutex_unlock(&cc_mu);
}

static void *cc_worker(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
	int reg_fd = open(DIR "/register", O_WRONLY), lk_fd = open(DIR "/lookup", O_RDWR);
	char line[LINE_MAX_K + 1], ans[LINE_MAX_K + 1];
	long ops = 0;

	while (!cc_stop) {
		int pid, err, op;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		pid = __atomic_load_n(&cc_pids[x % CC_SLOTS], __ATOMIC_RELAXED);
		op = (x >> 20) % 16;
		if (pid <= 0)
			continue;
		ops++;
		if (op < 9) {
			snprintf(line, sizeof(line), "%d 0x%lx 0x%lx 0x%x %llu %u\n", pid,
				 cc_area + ((x >> 8) % CC_PAGES) * PAGE, (1 + (x >> 30) % 3) * PAGE,
				 (unsigned int)(x >> 40) % 32, (unsigned long long)(x >> 12), (unsigned int)(x >> 50) % 256);
			err = wr_fd(reg_fd, line, strlen(line));
			/* EBUSY: a target caught inside exec, whose new mm is not set up yet (documented). */
			if (err && err != ESRCH && err != EEXIST && err != ENOMEM && err != EDQUOT && err != ENOSPC &&
			    err != EBUSY)
				cc_note("register", err);
			if (err == EBUSY)
				__atomic_fetch_add(&cc_ebusy, 1, __ATOMIC_RELAXED);
		} else if (op < 13) {
			snprintf(line, sizeof(line), "%d 0x%lx\n", pid, cc_area + ((x >> 8) % CC_PAGES) * PAGE);
			err = wr_fd(lk_fd, line, strlen(line));
			if (!err && pread(lk_fd, ans, sizeof(ans) - 1, 0) < 0)
				cc_note("lookup read", errno);
			if (err && err != ESRCH && err != ENOENT)
				cc_note("lookup", err);
		} else if (op < 15) {
			snprintf(line, sizeof(line), "%d\n", pid);
			err = wr("clear", line);
			if (err && err != ESRCH)
				cc_note("clear", err);
		} else if ((x >> 33) % 64 == 0) {
			err = wr("clear", "all\n");
			if (err)
				cc_note("clear all", err);
		} else {
			free(read_all(DIR "/dump"));
		}
	}
	close(reg_fd);
	close(lk_fd);
	__atomic_fetch_add(&cc_ops, ops, __ATOMIC_RELAXED);
	return NULL;
}

/* What a child does before it goes: exit, unmap part of the area, move it, or exec. */
static void cc_child(uint64_t r)
{
	struct timespec ts = { 0, (long)(r % 20) * 1000000L };

	nanosleep(&ts, NULL);
	switch ((r >> 8) % 4) {
	case 0:
		munmap((void *)(cc_area + PAGE * ((r >> 16) % CC_PAGES)), 2 * PAGE);
		nanosleep(&ts, NULL);
		break;
	case 1:
		mremap((void *)cc_area, CC_PAGES * PAGE, CC_PAGES * PAGE / 2, 0);
		nanosleep(&ts, NULL);
		break;
	case 2:
		execl("/bin/busybox", "true", (char *)NULL);
		break;
	default:
		break;
	}
	_exit(0);
}

static void t_concurrent(int seconds)
{
	pthread_t th[4];
	struct timespec t0, now;
	long spawned = 0, elapsed_ms = 0;

	failures = 0;
	cc_stop = 0;
	cc_ops = cc_unexpected = 0;
	CHECK(wr("clear", "all") == 0, "clear");
	cc_area = (unsigned long)map_pages(CC_PAGES, PROT_READ | PROT_WRITE);
	CHECK(cc_area, "mmap");
	for (long i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, cc_worker, (void *)(i + 1));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (elapsed_ms < seconds * 1000L) {
		int slot = rnd() % CC_SLOTS, old = cc_pids[slot], st;
		uint64_t r = rnd();
		pid_t child = fork();

		if (child == 0)
			cc_child(r);
		if (child > 0) {
			spawned++;
			__atomic_store_n(&cc_pids[slot], child, __ATOMIC_RELAXED);
		}
		if (old > 0)
			waitpid(old, &st, 0);
		clock_gettime(CLOCK_MONOTONIC, &now);
		elapsed_ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
	}
	cc_stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < CC_SLOTS; i++)
		if (cc_pids[i] > 0)
			waitpid(cc_pids[i], NULL, 0);
	memset(cc_pids, 0, sizeof(cc_pids));
	munmap((void *)cc_area, CC_PAGES * PAGE);
	CHECK(cc_unexpected == 0, "%ld unexpected errnos under concurrency", cc_unexpected);
	CHECK(dump(NULL, 0) == 0 || wr("clear", "all") == 0, "clear after the concurrent phase");
	CHECK(dump(NULL, 0) == 0, "registry not empty after every child exited and clear all: %d", dump(NULL, 0));
	emit("# kvds: concurrent_ms=%ld concurrent_ops=%ld concurrent_processes=%ld concurrent_ebusy=%ld\n",
	     elapsed_ms, cc_ops, spawned, cc_ebusy);
	result("concurrent_register_clear_lookup_vs_exit", failures);
}

static void t_final(void)
{
	failures = 0;
	CHECK(wr("clear", "all") == 0, "clear all");
	CHECK(dump(NULL, 0) == 0, "registry not empty at the end: %d", dump(NULL, 0));
	result("registry_empty_at_end", failures);
}

int main(int argc, char **argv)
{
	long fuzz = 10000, valid = 10000;
	uint64_t seed = 1;
	int concurrent = 60;
	const char *table = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--fuzz") && i + 1 < argc)
			fuzz = atol(argv[++i]);
		else if (!strcmp(argv[i], "--valid") && i + 1 < argc)
			valid = atol(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--concurrent") && i + 1 < argc)
			concurrent = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--table") && i + 1 < argc)
			table = argv[++i];
		else if (!strcmp(argv[i], "--check-table") && i + 1 < argc)
			return check_table(argv[++i], 0) ? 1 : 0;
		else if (!strcmp(argv[i], "--ktap") && i + 1 < argc)
			ktap = fopen(argv[++i], "w");
		else {
			fprintf(stderr, "usage: %s [--fuzz N] [--valid N] [--seed S] [--concurrent SECONDS] [--table FILE] "
				"[--ktap FILE] | --check-table FILE\n", argv[0]);
			return 2;
		}
	}
	emit("KTAP version 1\n1..%d\n", NTESTS);
	t_interface();
	t_roundtrip();
	t_overlap();
	t_lookup();
	t_clear();
	t_exit_cleanup();
	t_bound();
	t_errno_table();
	t_kernel_table(table);
	t_fuzz(fuzz, seed);
	rng = (seed ? seed : 1) ^ 0x5bd1e995;
	t_valid(valid);
	t_concurrent(concurrent);
	t_final();
	emit("# kvds: tests=%d\n", test_no);
	return 0;
}
