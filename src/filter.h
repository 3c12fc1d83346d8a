/* SPDX-License-Identifier: MIT */
/*
 * A seccomp filter as a list of rules, compiled to classic BPF by brokered itself.
 *
 * The rules say what sandbox.c wants (notify openat when a write flag is set, refuse mount, ...);
 * filter_compile() turns them into a program the kernel runs on every syscall of the command:
 * the architecture checked, then a binary search over the syscall numbers that have rules, so
 * that a syscall without one (read, close, fstat: most of what a build or a grep makes) is
 * allowed after a handful of instructions. A few microseconds at start-up, no library to load
 * (libseccomp cost more than a millisecond per run, most of it the loading and the export).
 */
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FILTER_ALLOW	SECCOMP_RET_ALLOW
#define FILTER_NOTIFY	SECCOMP_RET_USER_NOTIF
#define FILTER_ERRNO(e) (SECCOMP_RET_ERRNO | ((uint32_t)(e)&SECCOMP_RET_DATA))

enum filter_op {
	/* (argument & mask) == datum, on all 64 bits: an int argument has mask 0xffffffff (the
	 * kernel reads only its low 32 bits, whatever the high ones hold) */
	FILTER_MASKED_EQ,
	FILTER_NE, /* argument != datum, on all 64 bits (a pointer) */
};

struct filter_cmp {
	unsigned arg; /* 0..5 */
	enum filter_op op;
	uint64_t mask, datum;
};

#define FILTER_CMP_MAX 2

struct filter_rule {
	uint32_t nr;
	uint32_t action;
	unsigned n_cmp; /* all must hold; 0: always */
	struct filter_cmp cmp[FILTER_CMP_MAX];
};

/* Rules in the order added. For one syscall the first rule that holds decides; none: allowed. */
struct filter {
	struct filter_rule *rules;
	size_t n, cap;
};

/* 0, -ENOMEM, or -EINVAL (a bad argument number or too many comparisons). */
int filter_add(struct filter *f, uint32_t action, int nr, unsigned n_cmp,
	       const struct filter_cmp *cmp);
void filter_done(struct filter *f);

/*
 * The program for the native architecture: another ABI (i386's int 0x80, x32's numbers) gets
 * ENOSYS. prog->filter is malloc'd. 0, -ENOMEM, or -E2BIG (more than BPF_MAXINSNS).
 */
int filter_compile(const struct filter *f, struct sock_fprog *prog);

/* ---- The listener's side (seccomp_unotify(2)) ---- */

/* Buffers for a notification and its answer, as large as the running kernel's (which may be newer
 * than these headers). Free both with free(). */
int filter_notif_alloc(struct seccomp_notif **ret_req, struct seccomp_notif_resp **ret_resp);
/* The next notification into req (zeroed first, as the kernel insists): 0, or -errno (-ENOENT:
 * the target died meanwhile; -EINTR). */
int filter_notif_receive(int listener, struct seccomp_notif *req);
/* 0, or -errno (-ENOENT: the target was killed or its syscall interrupted meanwhile). */
int filter_notif_respond(int listener, struct seccomp_notif_resp *resp);
/* 0 while the notification id is still pending, else -ENOENT (or -errno). */
int filter_notif_id_valid(int listener, uint64_t id);
