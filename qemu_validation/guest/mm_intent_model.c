// SPDX-License-Identifier: GPL-2.0
/*
 * mm_intent_model: the validator's reference model of mm_intent's register parser; see mm_intent_model.h.
 * Compiled with mm_intent_validate.c into one static binary (qemu_validation/validate_run.py).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mm_intent_model.h"

char *read_all(const char *path)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	int fd = open(path, O_RDONLY);
	ssize_t r;

	if (fd < 0 || !buf) {
		free(buf);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((r = read(fd, buf + len, cap - len - 1)) > 0) {
		len += r;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

static int kgraph(unsigned char c)
{
	return (c > 0x20 && c < 0x7f) || c >= 0xa1; /* lib/ctype.c: Latin-1 letters/punctuation are graphic */
}

/* lib/kstrtox.c _kstrtoull(): overflow is reported before trailing characters. */
static int m_kstrtoull(const char *s, unsigned int base, unsigned long long *res)
{
	unsigned long long v = 0;
	unsigned int n = 0;
	int overflow = 0;

	if (base == 16 && s[0] == '0' && (s[1] | 0x20) == 'x')
		s += 2;
	for (;; s++, n++) {
		unsigned int c = (unsigned char)*s, lc = c | 0x20, val;

		if (c >= '0' && c <= '9')
			val = c - '0';
		else if (lc >= 'a' && lc <= 'f')
			val = lc - 'a' + 10;
		else
			break;
		if (val >= base)
			break;
		if ((v & (~0ULL << 60)) && v > (ULLONG_MAX - val) / base)
			overflow = 1;
		v = v * base + val;
	}
	if (overflow)
		return -ERANGE;
	if (!n)
		return -EINVAL;
	if (*s == '\n')
		s++;
	if (*s)
		return -EINVAL;
	*res = v;
	return 0;
}

static int m_kstrtoull_plus(const char *s, unsigned int base, unsigned long long *res)
{
	return m_kstrtoull(s[0] == '+' ? s + 1 : s, base, res);
}

static int m_kstrtou32(const char *s, unsigned int base, unsigned int *res)
{
	unsigned long long v;
	int err = m_kstrtoull_plus(s, base, &v);

	if (err)
		return err;
	if (v != (unsigned int)v)
		return -ERANGE;
	*res = v;
	return 0;
}

static int m_kstrtoint(const char *s, int *res)
{
	unsigned long long v;
	long long x;
	int err;

	if (s[0] == '-') {
		err = m_kstrtoull(s + 1, 10, &v);
		if (err)
			return err;
		if ((long long)-v > 0)
			return -ERANGE;
		x = -v;
	} else {
		err = m_kstrtoull_plus(s, 10, &v);
		if (err)
			return err;
		if ((long long)v < 0)
			return -ERANGE;
		x = v;
	}
	if (x != (int)x)
		return -ERANGE;
	*res = x;
	return 0;
}

/* A thread-group leader with an address space (kernel threads and zombies have no VmSize). */
static int live_process(int pid)
{
	char path[64], *s;
	int tgid = -1, has_mm;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	s = read_all(path);
	if (!s)
		return 0;
	if (strstr(s, "\nTgid:"))
		tgid = atoi(strstr(s, "\nTgid:") + 6);
	has_mm = strstr(s, "\nVmSize:") != NULL;
	free(s);
	return tgid == pid && has_mm;
}

/* Is [start, end) covered by mappings of `pid` (/proc/<pid>/maps)? */
static int model_mapped(int pid, unsigned long start, unsigned long end)
{
	char path[64], *text, *line, *save = NULL;
	unsigned long addr = start, lo, hi;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	text = read_all(path);
	if (!text)
		return 0;
	for (line = strtok_r(text, "\n", &save); line && addr < end; line = strtok_r(NULL, "\n", &save)) {
		if (sscanf(line, "%lx-%lx", &lo, &hi) != 2 || hi <= addr)
			continue;
		if (lo > addr)
			break;
		addr = hi;
	}
	free(text);
	return addr >= end;
}

/* The pid a pidfd of this process refers to (-1: exited), or 0 when fd is not an open pidfd. */
static int model_pidfd(int fd)
{
	char path[64], link[128], *info, *p;
	ssize_t n;
	int pid = 0;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n <= 0)
		return 0;
	link[n] = '\0';
	if (!strstr(link, "pidfd"))
		return 0;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	info = read_all(path);
	if (info && (p = strstr(info, "\nPid:")))
		pid = atoi(p + 5);
	free(info);
	return pid ? pid : -1;
}

/* The errno the documented rules give for the line itself (0: well formed); fills *r. */
int model_parse(const unsigned char *in, size_t n, struct mreq *r)
{
	char buf[LINE_MAX_K + 1], *tok[7], *s;
	unsigned long long start = 0, len = 0, dl;
	unsigned int flags = 0, prio;
	int pid = 0, ntok = 0, se, le, fe, pidfd = 0, te;
	const unsigned char *nl;

	if (n > LINE_MAX_K)
		return E2BIG;
	if (n == 0)
		return EINVAL;
	nl = memchr(in, '\n', n);
	if (nl) {
		if (nl != in + n - 1)
			return EBADMSG;
		n--;
	}
	for (size_t i = 0; i < n; i++)
		if (in[i] != ' ' && !kgraph(in[i]))
			return EINVAL;
	memcpy(buf, in, n);
	buf[n] = '\0';
	for (s = buf;;) {
		while (*s == ' ')
			s++;
		if (!*s)
			break;
		if (ntok == 6)
			return EBADMSG;
		tok[ntok++] = s;
		while (*s && *s != ' ')
			s++;
		if (*s)
			*s++ = '\0';
	}
	if (ntok < 6)
		return EINVAL;
	se = m_kstrtoull_plus(tok[1], 16, &start);
	le = m_kstrtoull_plus(tok[2], 16, &len);
	fe = m_kstrtou32(tok[3], 16, &flags);
	pidfd = !strncmp(tok[0], "pidfd:", 6);
	te = m_kstrtoint(tok[0] + (pidfd ? 6 : 0), &pid) || pid < (pidfd ? 0 : 1);
	if (te || (se && se != -ERANGE) || (le && le != -ERANGE) || (fe && fe != -ERANGE) ||
	    m_kstrtoull_plus(tok[4], 10, &dl) || m_kstrtou32(tok[5], 10, &prio) || prio > 255)
		return EINVAL;
	if (fe || (flags & ~VALID_FLAGS))
		return EOPNOTSUPP;
	if (se || le || !len || start > TASK_SIZE_MAX_4L || len > TASK_SIZE_MAX_4L - start)
		return ERANGE;
	if ((start | len) & (PAGE - 1))
		return EDOM;
	*r = (struct mreq){ pid, pidfd, start, len, dl, flags, prio };
	return 0;
}

/*
 * The errno the documented rules give for writing buf[0..n) to register (0: it would be accepted), up to the
 * checks that depend on the registry's contents (ENOSPC, EDQUOT, EEXIST). Targets here never share their mm.
 */
int model_register(const unsigned char *in, size_t n)
{
	struct mreq r;
	int err = model_parse(in, n, &r), pid;

	if (err)
		return err;
	pid = r.pid;
	if (r.pidfd) {
		pid = model_pidfd(r.pid);
		if (!pid)
			return EBADF;
	}
	if (pid <= 0 || !live_process(pid))
		return ESRCH;
	if (!model_mapped(pid, r.start, r.start + r.len))
		return ENOMEM;
	return 0;
}
