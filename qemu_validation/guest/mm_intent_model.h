// SPDX-License-Identifier: GPL-2.0
/*
 * mm_intent_model: the validator's reference model of mm_intent's register parser (mm_intent_model.c).
 *
 * The documented parsing rules, including the kernel's kstrtox() quirks, as C of its own: the validator judges
 * every random line by it (the kernel must return exactly the errno it predicts), and checks it against the
 * kernel's own errno table (mm/mm_intent_kunit.c) first, so the model is never only a hand port.
 */
#ifndef MM_INTENT_MODEL_H
#define MM_INTENT_MODEL_H

#include <stddef.h>

#define LINE_MAX_K 128
#define PAGE 4096UL
#define TASK_SIZE_MAX_4L 0x7ffffffff000UL /* x86_64, 4-level paging */
#define VALID_FLAGS 0x1fu

/* One register line as the model parsed it. */
struct mreq {
	int pid, pidfd;
	unsigned long long start, len, dl;
	unsigned int flags, prio;
};


/* The errno the documented rules give for the line itself (0: well formed); fills *r. */
int model_parse(const unsigned char *in, size_t n, struct mreq *r);

/*
 * The errno the documented rules give for writing in[0..n) to register (0: it would be accepted), up to the
 * checks that depend on the registry's contents (ENOSPC, EDQUOT, EEXIST).
 */
int model_register(const unsigned char *in, size_t n);

/* The whole of a (/proc) file, NUL-terminated and malloc'ed; NULL when it cannot be read. */
char *read_all(const char *path);

#endif
