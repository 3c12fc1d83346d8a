/* SPDX-License-Identifier: MIT */
#include "filter.h"

#include <errno.h>
#include <linux/audit.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/alloc-util.h"
#include "basic/macro.h"

#if defined(__x86_64__)
#define FILTER_AUDIT_ARCH AUDIT_ARCH_X86_64
#define X32_SYSCALL_BIT	  0x40000000u
#elif defined(__aarch64__)
#define FILTER_AUDIT_ARCH AUDIT_ARCH_AARCH64
#else
#error "brokered's filter knows x86_64 and aarch64"
#endif

/* Where the halves of a 64-bit argument are in struct seccomp_data. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define ARG_LO(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i)))
#define ARG_HI(i) (ARG_LO(i) + 4)
#else
#define ARG_HI(i) ((uint32_t)(offsetof(struct seccomp_data, args) + 8 * (i)))
#define ARG_LO(i) (ARG_HI(i) + 4)
#endif

int filter_add(struct filter *f, uint32_t action, int nr, unsigned n_cmp,
	       const struct filter_cmp *cmp)
{
	if (nr < 0 || n_cmp > FILTER_CMP_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < n_cmp; i++)
		if (cmp[i].arg > 5 ||
		    (cmp[i].op == FILTER_MASKED_EQ && (cmp[i].datum & ~cmp[i].mask)))
			return -EINVAL; /* a condition that could never hold is a mistake */
	if (ARRAY_GROW(f->rules, f->cap, f->n, 64) < 0)
		return -ENOMEM;
	struct filter_rule *r = &f->rules[f->n++];
	*r = (struct filter_rule){.nr = (uint32_t)nr, .action = action, .n_cmp = n_cmp};
	if (n_cmp)
		memcpy(r->cmp, cmp, n_cmp * sizeof *cmp);
	return 0;
}

void filter_done(struct filter *f)
{
	free(f->rules);
	*f = (struct filter){0};
}

struct prog {
	struct sock_filter *v;
	size_t n, cap;
	int error;
};

static size_t emit(struct prog *p, uint16_t code, uint8_t jt, uint8_t jf, uint32_t k)
{
	if (p->error)
		return 0;
	if (p->n == BPF_MAXINSNS) {
		p->error = -E2BIG;
		return 0;
	}
	if (ARRAY_GROW(p->v, p->cap, p->n, 256) < 0) {
		p->error = -ENOMEM;
		return 0;
	}
	p->v[p->n] = (struct sock_filter)BPF_JUMP(code, k, jt, jf);
	return p->n++;
}

/* Point the conditional jump at `at` (its true or false branch) to the next instruction. */
static void land(struct prog *p, size_t at, bool true_branch)
{
	if (p->error)
		return;
	size_t d = p->n - (at + 1);
	if (d > UINT8_MAX) {
		p->error = -E2BIG;
		return;
	}
	if (true_branch)
		p->v[at].jt = (uint8_t)d;
	else
		p->v[at].jf = (uint8_t)d;
}

static void emit_ld(struct prog *p, uint32_t off)
{
	emit(p, BPF_LD | BPF_W | BPF_ABS, 0, 0, off);
}

static void emit_ret(struct prog *p, uint32_t action)
{
	emit(p, BPF_RET | BPF_K, 0, 0, action);
}

/* (half & mask) == datum, for one 32-bit half: on a mismatch, the jump at *fail goes on. */
static void emit_half_eq(struct prog *p, uint32_t off, uint32_t mask, uint32_t datum, size_t *fail,
			 size_t *n_fail)
{
	if (!mask)
		return;
	emit_ld(p, off);
	if (mask != UINT32_MAX)
		emit(p, BPF_ALU | BPF_AND | BPF_K, 0, 0, mask);
	fail[(*n_fail)++] = emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, datum);
}

/* One rule: its conditions, then its action; a condition that fails goes to what follows. */
static void emit_rule(struct prog *p, const struct filter_rule *r)
{
	size_t fail[2 * FILTER_CMP_MAX], n_fail = 0; /* false branches, but NE's: true */
	size_t ne_fail[FILTER_CMP_MAX], n_ne_fail = 0;
	for (unsigned i = 0; i < r->n_cmp; i++) {
		const struct filter_cmp *c = &r->cmp[i];
		if (c->op == FILTER_MASKED_EQ) {
			emit_half_eq(p, ARG_HI(c->arg), (uint32_t)(c->mask >> 32),
				     (uint32_t)(c->datum >> 32), fail, &n_fail);
			emit_half_eq(p, ARG_LO(c->arg), (uint32_t)c->mask, (uint32_t)c->datum, fail,
				     &n_fail);
		} else {
			/* low half differs: holds (skip the high half's test); else the high half
			 * decides */
			emit_ld(p, ARG_LO(c->arg));
			emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 2, (uint32_t)c->datum);
			emit_ld(p, ARG_HI(c->arg));
			ne_fail[n_ne_fail++] =
			    emit(p, BPF_JMP | BPF_JEQ | BPF_K, 0, 0, (uint32_t)(c->datum >> 32));
		}
	}
	emit_ret(p, r->action);
	for (size_t i = 0; i < n_fail; i++)
		land(p, fail[i], false);
	for (size_t i = 0; i < n_ne_fail; i++)
		land(p, ne_fail[i], true);
}

/* Syscall numbers lo..hi with the rules rules[idx[first .. first + count)]; none: allowed. */
struct segment {
	uint32_t lo, hi;
	size_t first, count;
};

/*
 * A binary search over the segments [a, b), which cover every number from segs[a].lo on: at each
 * node, nr >= the middle one's start goes right, past the left subtree (by a long jump if the
 * left subtree is longer than a conditional jump reaches). A leaf is a segment's rules, or a
 * plain "allowed" for a number without any.
 */
static void emit_tree(struct prog *p, const struct filter *f, const size_t *idx,
		      const struct segment *segs, size_t a, size_t b, unsigned depth)
{
	if (depth > 64) {
		p->error = -E2BIG;
		return;
	}
	if (b - a == 1) {
		for (size_t i = 0; i < segs[a].count; i++)
			emit_rule(p, &f->rules[idx[segs[a].first + i]]);
		emit_ret(p, FILTER_ALLOW);
		return;
	}
	size_t mid = a + (b - a) / 2;
	size_t at = emit(p, BPF_JMP | BPF_JGE | BPF_K, 0, 0, segs[mid].lo);
	size_t start = p->n;
	emit_tree(p, f, idx, segs, a, mid, depth + 1);
	if (p->error)
		return;
	if (p->n - start <= UINT8_MAX) {
		land(p, at, true);
	} else {
		/* too far: the left subtree moves one down, behind a long jump over it */
		size_t len = p->n - start;
		emit(p, 0, 0, 0, 0);
		if (p->error)
			return;
		memmove(&p->v[start + 1], &p->v[start], len * sizeof *p->v);
		p->v[start] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, (uint32_t)len, 0, 0);
		p->v[at].jf = 1;
	}
	emit_tree(p, f, idx, segs, mid, b, depth + 1);
}

static const struct filter *sort_rules;

/* By number, then in the order added. */
static int cmp_idx(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	uint32_t nx = sort_rules->rules[x].nr, ny = sort_rules->rules[y].nr;
	return nx != ny ? (nx < ny ? -1 : 1) : (x < y ? -1 : x > y);
}

/* One unconditional rule with this action? */
static bool plain(const struct filter *f, const size_t *idx, const struct segment *s,
		  uint32_t *action)
{
	if (s->count != 1 || f->rules[idx[s->first]].n_cmp)
		return false;
	*action = f->rules[idx[s->first]].action;
	return true;
}

int filter_compile(const struct filter *f, struct sock_fprog *prog)
{
	_cleanup_free_ size_t *idx = malloc((f->n ? f->n : 1) * sizeof *idx);
	_cleanup_free_ struct segment *segs = malloc((2 * f->n + 1) * sizeof *segs);
	if (!idx || !segs)
		return -ENOMEM;
	for (size_t i = 0; i < f->n; i++)
		idx[i] = i;
	sort_rules = f;
	qsort(idx, f->n, sizeof *idx, cmp_idx);
	sort_rules = NULL;
	/* A segment per number with rules, one per gap between them (from 0, and to the end);
	 * neighbours with the same single unconditional action merge (the range of numbers newer
	 * than this build is one segment). */
	size_t n_segs = 0;
	uint32_t next = 0; /* the first number not covered yet */
	for (size_t i = 0; i < f->n;) {
		uint32_t nr = f->rules[idx[i]].nr;
		size_t j = i;
		while (j < f->n && f->rules[idx[j]].nr == nr)
			j++;
		struct segment s = {.lo = nr, .hi = nr, .first = i, .count = j - i};
		uint32_t a1, a2;
		if (nr > next)
			segs[n_segs++] = (struct segment){.lo = next, .hi = nr - 1};
		if (nr == next && n_segs && plain(f, idx, &segs[n_segs - 1], &a1) &&
		    plain(f, idx, &s, &a2) && a1 == a2)
			segs[n_segs - 1].hi = nr;
		else
			segs[n_segs++] = s;
		next = nr + 1;
		i = j;
	}
	if (next > 0 || !n_segs)
		segs[n_segs++] = (struct segment){.lo = next, .hi = UINT32_MAX};

	struct prog p = {0};
	emit_ld(&p, offsetof(struct seccomp_data, arch));
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, FILTER_AUDIT_ARCH);
	emit_ret(&p, FILTER_ERRNO(ENOSYS));
	emit_ld(&p, offsetof(struct seccomp_data, nr));
#ifdef X32_SYSCALL_BIT
	/* x32's numbers come with x86_64's arch: not ours either. -1 (no syscall: what a tracer
	 * sets to skip one) stays the kernel's ENOSYS, allowed as libseccomp's filters do. */
	emit(&p, BPF_JMP | BPF_JGE | BPF_K, 0, 2, X32_SYSCALL_BIT);
	emit(&p, BPF_JMP | BPF_JEQ | BPF_K, 1, 0, UINT32_MAX);
	emit_ret(&p, FILTER_ERRNO(ENOSYS));
#endif
	emit_tree(&p, f, idx, segs, 0, n_segs, 0);
	if (p.error) {
		free(p.v);
		return p.error;
	}
	prog->filter = p.v;
	prog->len = (unsigned short)p.n;
	return 0;
}

static size_t notif_size = sizeof(struct seccomp_notif);

int filter_notif_alloc(struct seccomp_notif **ret_req, struct seccomp_notif_resp **ret_resp)
{
	struct seccomp_notif_sizes sz = {0};
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
		return negative_errno();
	notif_size = MAX((size_t)sz.seccomp_notif, sizeof(struct seccomp_notif));
	struct seccomp_notif *req = calloc(1, notif_size);
	struct seccomp_notif_resp *resp =
	    calloc(1, MAX((size_t)sz.seccomp_notif_resp, sizeof(struct seccomp_notif_resp)));
	if (!req || !resp) {
		free(req);
		free(resp);
		return -ENOMEM;
	}
	*ret_req = req;
	*ret_resp = resp;
	return 0;
}

int filter_notif_receive(int listener, struct seccomp_notif *req)
{
	memset(req, 0, notif_size);
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0 ? negative_errno() : 0;
}

int filter_notif_respond(int listener, struct seccomp_notif_resp *resp)
{
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 ? negative_errno() : 0;
}

int filter_notif_id_valid(int listener, uint64_t id)
{
	return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0 ? negative_errno() : 0;
}
