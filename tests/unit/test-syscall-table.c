/* SPDX-License-Identifier: MIT */
/*
 * The syscall table (src/syscall-table.c) and what is built from it. The numbers of both
 * architectures against libseccomp's tables; the BPF filter sandbox_build_filter() produces, run
 * by a small classic-BPF interpreter over every syscall number: it notifies exactly the table's
 * syscalls, under each row's condition; and syscall_decode() of a synthetic notification for each
 * row, with this test's own thread as the target, fills the request from the right arguments.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/openat2.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>
#include <utime.h>

#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "filter.h"
#include "sandbox.h"
#include "syscall-table.h"

/* tap.h's is_int()/is_str() nest ok(), whose local shadows theirs. */
#pragma GCC diagnostic ignored "-Wshadow"
#include "tap.h"

#if defined(__x86_64__)
#define NATIVE_AUDIT_ARCH  AUDIT_ARCH_X86_64
#define FOREIGN_AUDIT_ARCH AUDIT_ARCH_I386
#else
#define NATIVE_AUDIT_ARCH  AUDIT_ARCH_AARCH64
#define FOREIGN_AUDIT_ARCH AUDIT_ARCH_ARM
#endif

/* ---- the numbers ---- */

/* libseccomp knows a syscall (>= 0), knows an architecture lacks it (a pseudo number < -1), or
 * does not know it (-1, newer than 2.5.4: then it must be one of the numbers shared by all
 * architectures since 5.1). */
static void check_number(const char *name, uint32_t arch, const char *arch_name, int nr)
{
	int want = seccomp_syscall_resolve_name_arch(arch, name);
	if (want >= 0)
		is_int(nr, want, "%s: %s number", name, arch_name);
	else if (want < -1)
		is_int(nr, -1, "%s: none on %s", name, arch_name);
	else
		ok(nr >= 424 && nr <= BROKERED_NR_KNOWN_MAX, "%s: %s number %d is a shared one",
		   name, arch_name, nr);
}

static void numbers(void)
{
	for (size_t i = 0; i < syscall_table_size; i++) {
		const struct syscall_row *row = &syscall_table[i];
		check_number(row->name, SCMP_ARCH_X86_64, "x86_64", row->nr_x86_64);
		check_number(row->name, SCMP_ARCH_AARCH64, "aarch64", row->nr_aarch64);
		if (seccomp_syscall_resolve_name_arch(SCMP_ARCH_X86_64, row->name) == -1)
			is_int(row->nr_aarch64, row->nr_x86_64, "%s: same number on both",
			       row->name);
		for (size_t j = 0; j < i; j++) {
			int a = syscall_row_nr(row), b = syscall_row_nr(&syscall_table[j]);
			if (a >= 0 && a == b)
				ok(0, "%s and %s share number %d", row->name, syscall_table[j].name,
				   a);
		}
		ok(syscall_row_nr(row) < 0 || syscall_table_find(syscall_row_nr(row)) == row,
		   "%s: found by its number", row->name);
	}
	ok(syscall_table_find(-10166) == NULL && syscall_table_find(-1) == NULL,
	   "negative numbers are not found");
}

/* The rows are well formed: the arguments the conditions and flags need are there. */
static void shapes(void)
{
	for (size_t i = 0; i < syscall_table_size; i++) {
		const struct syscall_row *row = &syscall_table[i];
		bool flags = syscall_row_arg(row, SYSCALL_ARG_FLAGS) >= 0;
		ok(flags == (row->valid_flags != 0), "%s: FLAGS argument iff valid flags",
		   row->name);
		if (row->notify == SYSCALL_NOTIFY_WRITE_FLAGS)
			ok(syscall_row_arg(row, SYSCALL_ARG_OPEN_FLAGS) >= 0,
			   "%s: notified on open flags it has", row->name);
		if (row->notify == SYSCALL_NOTIFY_SOCKADDR)
			ok(syscall_row_arg(row, SYSCALL_ARG_SOCKADDR) >= 0,
			   "%s: notified on an address it has", row->name);
		ok(row->op <= SYSCALL_OP_SYNC && row->name && *row->name, "%s: op and name",
		   row->name);
		ok((row->op == SYSCALL_OP_SYNC) == (row->notify == SYSCALL_NOTIFY_COW_SYNC),
		   "%s: a sync iff notified for copy-on-write only", row->name);
		ok((syscall_row_arg(row, SYSCALL_ARG_SYNC_FLAGS) >= 0) == (row->sync_flags != 0) &&
		       (!row->sync_flags || row->op == SYSCALL_OP_SYNC),
		   "%s: SYNC_FLAGS argument iff sync flags, and only in a sync's row", row->name);
		if (row->notify == SYSCALL_NOTIFY_PATH_UNLESS_RO)
			ok(syscall_row_arg(row, SYSCALL_ARG_PATH_OR_FD) >= 0,
			   "%s: notified on a path it has", row->name);
		if (row->notify == SYSCALL_NOTIFY_RO_WRITE_ACCESS)
			ok(syscall_row_arg(row, SYSCALL_ARG_ACCESS_MODE) >= 0,
			   "%s: notified on an access mode it has", row->name);
		if (row->notify == SYSCALL_NOTIFY_UNLESS_RO)
			ok(syscall_row_arg(row, SYSCALL_ARG_FD) == 0 &&
			       row->op >= BROKER_OP_CHMOD && row->op <= BROKER_OP_REMOVEXATTR,
			   "%s: only a metadata call on an fd is left to read-only mounts",
			   row->name);
	}
}

/* ---- the filter, run ---- */

#define RUN_BAD 0xdeadbeefu /* an instruction this interpreter does not know */

static size_t bpf_steps; /* instructions run */

/* Classic BPF as the kernel runs a seccomp filter (A, X, M[16]; loads from seccomp_data). */
static uint32_t bpf_run(const struct sock_fprog *p, const struct seccomp_data *d)
{
	uint32_t A = 0, X = 0, M[BPF_MEMWORDS] = {0};
	for (size_t pc = 0; pc < p->len; pc++) {
		const struct sock_filter *f = &p->filter[pc];
		bpf_steps++;
		uint32_t src = BPF_SRC(f->code) == BPF_X ? X : f->k;
		switch (BPF_CLASS(f->code)) {
		case BPF_LD:
			if (f->code == (BPF_LD | BPF_W | BPF_ABS) && f->k % 4 == 0 &&
			    f->k + 4 <= sizeof *d)
				memcpy(&A, (const char *)d + f->k, 4);
			else if (f->code == (BPF_LD | BPF_IMM))
				A = f->k;
			else if (f->code == (BPF_LD | BPF_MEM) && f->k < BPF_MEMWORDS)
				A = M[f->k];
			else
				return RUN_BAD;
			break;
		case BPF_LDX:
			if (f->code == (BPF_LDX | BPF_IMM))
				X = f->k;
			else if (f->code == (BPF_LDX | BPF_MEM) && f->k < BPF_MEMWORDS)
				X = M[f->k];
			else
				return RUN_BAD;
			break;
		case BPF_ST:
		case BPF_STX:
			if (f->k >= BPF_MEMWORDS)
				return RUN_BAD;
			M[f->k] = BPF_CLASS(f->code) == BPF_ST ? A : X;
			break;
		case BPF_ALU:
			switch (BPF_OP(f->code)) {
			case BPF_AND:
				A &= src;
				break;
			case BPF_OR:
				A |= src;
				break;
			case BPF_ADD:
				A += src;
				break;
			case BPF_SUB:
				A -= src;
				break;
			case BPF_RSH:
				A = src < 32 ? A >> src : 0;
				break;
			case BPF_LSH:
				A = src < 32 ? A << src : 0;
				break;
			default:
				return RUN_BAD;
			}
			break;
		case BPF_JMP: {
			bool t;
			switch (BPF_OP(f->code)) {
			case BPF_JA:
				pc += f->k;
				continue;
			case BPF_JEQ:
				t = A == src;
				break;
			case BPF_JGT:
				t = A > src;
				break;
			case BPF_JGE:
				t = A >= src;
				break;
			case BPF_JSET:
				t = (A & src) != 0;
				break;
			default:
				return RUN_BAD;
			}
			pc += t ? f->jt : f->jf;
			break;
		}
		case BPF_RET:
			return BPF_RVAL(f->code) == BPF_A ? A : f->k;
		case BPF_MISC:
			if (BPF_MISCOP(f->code) == BPF_TAX)
				X = A;
			else
				A = X;
			break;
		default:
			return RUN_BAD;
		}
	}
	return RUN_BAD; /* fell off the end */
}

static uint32_t run(const struct sock_fprog *p, int nr, uint64_t fill, int argno, uint64_t v)
{
	struct seccomp_data d = {.nr = nr, .arch = NATIVE_AUDIT_ARCH};
	for (int i = 0; i < 6; i++)
		d.args[i] = i == argno ? v : fill;
	return bpf_run(p, &d);
}

static bool notifies(uint32_t action)
{
	return (action & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF;
}

/* Is row notified with every argument set (any condition holds), and with all zero? */
static bool notified_all(const struct syscall_row *row, bool ro)
{
	bool setid_only = row && syscall_row_arg(row, SYSCALL_ARG_PERM) >= 0; /* fchmod */
	return row && !(ro && row->notify == SYSCALL_NOTIFY_UNLESS_RO && !setid_only) &&
	       !(!ro && row->notify == SYSCALL_NOTIFY_RO_WRITE_ACCESS) &&
	       row->notify != SYSCALL_NOTIFY_COW_SYNC;
}

static bool notified_none(const struct syscall_row *row, bool ro)
{
	return row && (row->notify == SYSCALL_NOTIFY_ALWAYS ||
		       (!ro && (row->notify == SYSCALL_NOTIFY_UNLESS_RO ||
				row->notify == SYSCALL_NOTIFY_PATH_UNLESS_RO)));
}

static void filter(bool restrict_ip, bool ro)
{
	struct sock_fprog prog = {0};
	int r = sandbox_build_filter(&prog, restrict_ip,
				     ro ? SANDBOX_MOUNTS_READ_ONLY : SANDBOX_MOUNTS_SHARED);
	if (!ok(r == 0, "filter (restrict_ip=%d, ro_mounts=%d) built", restrict_ip, ro))
		return;
	char mode[64];
	snprintf(mode, sizeof mode, "%s%s", restrict_ip ? "restricted" : "open",
		 ro ? ", read-only mounts" : "");
	/* Every number: notified with all arguments set (any condition holds) iff a row has it;
	 * with all arguments zero (no write flag, no address) iff its row notifies always. */
	int mismatches = 0, bad = 0;
	for (int nr = 0; nr < BROKERED_NR_FUTURE_LIMIT; nr++) {
		const struct syscall_row *row = syscall_table_find(nr);
		uint32_t all = run(&prog, nr, ~UINT64_C(0), -1, 0), none = run(&prog, nr, 0, -1, 0);
		bad += all == RUN_BAD || none == RUN_BAD;
		if (notifies(all) != notified_all(row, ro) ||
		    notifies(none) != notified_none(row, ro)) {
			mismatches++;
			printf("# %s: nr %d (%s) all=%#x none=%#x\n", mode, nr,
			       row ? row->name : "not in the table", all, none);
		}
	}
	is_int(bad, 0, "%s: the interpreter knows every instruction", mode);
	is_int(mismatches, 0, "%s: the filter notifies exactly the table's syscalls", mode);
	/* The conditions, one bit at a time. */
	for (size_t i = 0; i < syscall_table_size; i++) {
		const struct syscall_row *row = &syscall_table[i];
		int nr = syscall_row_nr(row);
		if (nr < 0 || row->notify == SYSCALL_NOTIFY_ALWAYS ||
		    row->notify == SYSCALL_NOTIFY_COW_SYNC /* never: see above */)
			continue;
		if (row->notify == SYSCALL_NOTIFY_UNLESS_RO) {
			int at = syscall_row_arg(row, SYSCALL_ARG_PERM);
			if (at >= 0)
				ok(notifies(run(&prog, nr, 0, at, 04755)) &&
				       notifies(run(&prog, nr, 0, at, 02755)) &&
				       notifies(run(&prog, nr, ~UINT64_C(0), at, 01777)) == !ro,
				   "%s: %s to a set-ID mode notified%s", mode, row->name,
				   ro ? ", to another not" : ", to another too");
		} else if (row->notify == SYSCALL_NOTIFY_PATH_UNLESS_RO) {
			int at = syscall_row_arg(row, SYSCALL_ARG_PATH_OR_FD);
			ok(notifies(run(&prog, nr, 0, at, 0x1000)) &&
			       notifies(run(&prog, nr, ~UINT64_C(0), at, 0)) == !ro,
			   "%s: %s notified with a path%s", mode, row->name,
			   ro ? ", the fd form not" : ", and the fd form");
		} else if (row->notify == SYSCALL_NOTIFY_RO_WRITE_ACCESS) {
			int at = syscall_row_arg(row, SYSCALL_ARG_ACCESS_MODE);
			ok(notifies(run(&prog, nr, 0, at, W_OK)) == ro &&
			       !notifies(run(&prog, nr, ~UINT64_C(0), at, R_OK | X_OK)),
			   "%s: %s for writing %s, for reading not", mode, row->name,
			   ro ? "notified" : "not notified");
		} else if (row->notify == SYSCALL_NOTIFY_WRITE_FLAGS) {
			int at = syscall_row_arg(row, SYSCALL_ARG_OPEN_FLAGS);
			static const uint64_t writes[] = {O_WRONLY, O_RDWR, O_CREAT, O_TRUNC,
							  O_TMPFILE};
			for (size_t k = 0; k < ELEMENTSOF(writes); k++)
				ok(notifies(run(&prog, nr, 0, at, writes[k])),
				   "%s: %s with open flags %#llx: notified", mode, row->name,
				   (unsigned long long)writes[k]);
			uint64_t ro = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
				      O_PATH | O_NOCTTY | O_APPEND;
			ok(!notifies(run(&prog, nr, ~UINT64_C(0), at, ro)),
			   "%s: %s read-only: runs in the kernel", mode, row->name);
		} else {
			int at = syscall_row_arg(row, SYSCALL_ARG_SOCKADDR);
			ok(notifies(run(&prog, nr, 0, at, 0x1000)) &&
			       !notifies(run(&prog, nr, ~UINT64_C(0), at, 0)),
			   "%s: %s notified only with an address", mode, row->name);
		}
	}
	struct seccomp_data foreign = {.nr = __NR_openat, .arch = FOREIGN_AUDIT_ARCH};
	is_int(bpf_run(&prog, &foreign), SECCOMP_RET_ERRNO | ENOSYS, "%s: a foreign ABI: ENOSYS",
	       mode);
	free(prog.filter);
}

/* sandbox.copyOnWrite: the kernel performs every file change on the overlay (or refuses it with
 * EROFS); only chroot and the socket calls with an address still go to the broker, and the
 * supervisor sees the synchronous calls the volatile overlay would not sync. */
static void filter_copy_on_write(bool restrict_ip)
{
	struct sock_fprog prog = {0};
	int r = sandbox_build_filter(&prog, restrict_ip, SANDBOX_MOUNTS_COPY_ON_WRITE);
	if (!ok(r == 0, "copy-on-write filter (restrict_ip=%d) built", restrict_ip))
		return;
	int wrong = 0, sockets = 0, syncs = 0;
	for (int nr = 0; nr < BROKERED_NR_FUTURE_LIMIT; nr++) {
		const struct syscall_row *row = syscall_table_find(nr);
		bool all = notifies(run(&prog, nr, ~UINT64_C(0), -1, 0));
		bool none = notifies(run(&prog, nr, 0, -1, 0));
		bool file = row && row->op < BROKER_OP_CONNECT;
		bool opens = file && (syscall_row_arg(row, SYSCALL_ARG_OPEN_FLAGS) >= 0 ||
				      syscall_row_arg(row, SYSCALL_ARG_OPEN_HOW) >= 0);
		bool want_all = row && row->op != SYSCALL_OP_ACCESS && (!file || opens);
		bool want_none =
		    want_all && (row->notify == SYSCALL_NOTIFY_ALWAYS
				     ? !file || syscall_row_arg(row, SYSCALL_ARG_OPEN_HOW) >= 0
				     : row->notify == SYSCALL_NOTIFY_COW_SYNC && !row->sync_flags);
		if (all != want_all || none != want_none) {
			wrong++;
			printf("# copy-on-write: nr %d (%s) all=%d none=%d\n", nr,
			       row ? row->name : "not in the table", all, none);
		}
		sockets += want_all && row->op >= BROKER_OP_CONNECT && row->op < _BROKER_OP_MAX;
		syncs += want_all && row->op == SYSCALL_OP_SYNC;
	}
	is_int(wrong, 0,
	       "copy-on-write (restrict_ip=%d): no file change is notified; chroot, the socket "
	       "calls and the syncs are, as their rows say",
	       restrict_ip);
	ok(sockets >= 4, "copy-on-write: the socket calls are in the filter (%d)", sockets);
	ok(syncs >= 7, "copy-on-write: sync, fsync & co. are in the filter (%d)", syncs);
	/* The conditions, one bit at a time. */
	uint64_t not_sync = ~(uint64_t)SYSCALL_OPEN_SYNC_FLAG & 0xffffffffu;
	for (size_t i = 0; i < syscall_table_size; i++) {
		const struct syscall_row *row = &syscall_table[i];
		int nr = syscall_row_nr(row), at;
		if (nr < 0)
			continue;
		if ((at = syscall_row_arg(row, SYSCALL_ARG_OPEN_FLAGS)) >= 0 &&
		    row->op < BROKER_OP_CONNECT)
			ok(notifies(run(&prog, nr, 0, at, O_WRONLY | O_DSYNC)) &&
			       notifies(run(&prog, nr, 0, at, O_RDONLY | O_SYNC)) &&
			       !notifies(run(&prog, nr, ~UINT64_C(0), at, not_sync)),
			   "copy-on-write: %s with O_DSYNC or O_SYNC notified, with any other flag "
			   "not",
			   row->name);
		if ((at = syscall_row_arg(row, SYSCALL_ARG_SYNC_FLAGS)) < 0)
			continue;
		bool each = true;
		for (uint64_t bit = 1; bit; bit <<= 1)
			if (row->sync_flags & bit)
				each &= notifies(run(&prog, nr, 0, at, bit));
		ok(each && !notifies(run(&prog, nr, ~UINT64_C(0), at, ~row->sync_flags)),
		   "copy-on-write: %s with a sync flag (%#llx) notified, with the others not",
		   row->name, (unsigned long long)row->sync_flags);
	}
	/* ... and those flags are the ones that sync, as the man pages name them */
	static const struct {
		const char *name;
		uint64_t flags;
	} syncing[] = {{"pwritev2", RWF_DSYNC | RWF_SYNC}, {"msync", MS_SYNC}};
	for (size_t k = 0; k < ELEMENTSOF(syncing); k++)
		for (size_t i = 0; i < syscall_table_size; i++)
			if (!strcmp(syscall_table[i].name, syncing[k].name))
				is_int((long long)syscall_table[i].sync_flags,
				       (long long)syncing[k].flags,
				       "copy-on-write: %s's sync flags", syncing[k].name);
	free(prog.filter);
}

/* ---- decoding ---- */

/* ---- brokered's compiler against libseccomp's ---- */

/* The same rules through libseccomp (as brokered built its filter until it compiled its own). */
static int libseccomp_program(const struct filter *f, struct sock_fprog *prog)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return -ENOMEM;
	int r = 0;
	if ((r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS))) < 0 ||
	    (r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2)) < 0)
		goto out;
	for (size_t i = 0; i < f->n && r >= 0; i++) {
		const struct filter_rule *rule = &f->rules[i];
		struct scmp_arg_cmp c[FILTER_CMP_MAX];
		for (unsigned k = 0; k < rule->n_cmp; k++) {
			const struct filter_cmp *x = &rule->cmp[k];
			c[k] = x->op == FILTER_MASKED_EQ
				   ? (struct scmp_arg_cmp){.arg = x->arg,
							   .op = SCMP_CMP_MASKED_EQ,
							   .datum_a = x->mask,
							   .datum_b = x->datum}
				   : (struct scmp_arg_cmp){
					 .arg = x->arg, .op = SCMP_CMP_NE, .datum_a = x->datum};
		}
		r = seccomp_rule_add_exact_array(ctx, rule->action, (int)rule->nr, rule->n_cmp, c);
		if (r == -EEXIST)
			r = 0;
	}
	if (r < 0)
		goto out;
	int mfd = memfd_create("bpf", MFD_CLOEXEC);
	if (mfd < 0 || (r = seccomp_export_bpf(ctx, mfd)) < 0)
		goto out;
	off_t len = lseek(mfd, 0, SEEK_END);
	prog->filter = malloc((size_t)len);
	prog->len = (unsigned short)(len / (off_t)sizeof(struct sock_filter));
	if (!prog->filter || pread(mfd, prog->filter, (size_t)len, 0) != len)
		r = -EIO;
	close(mfd);
out:
	seccomp_release(ctx);
	return r;
}

/* Arguments to try: zero, all ones, every single bit, and the values the rules name (with and
 * without the high 32 bits set), in each argument. */
static size_t argument_values(const struct filter *f, uint64_t *v, size_t max)
{
	size_t n = 0;
	v[n++] = 0;
	v[n++] = ~UINT64_C(0);
	for (int b = 0; b < 64; b++)
		v[n++] = UINT64_C(1) << b;
	for (size_t i = 0; i < f->n; i++)
		for (unsigned k = 0; k < f->rules[i].n_cmp && n + 4 <= max; k++) {
			uint64_t d = f->rules[i].cmp[k].datum;
			v[n++] = d;
			v[n++] = d | (UINT64_C(1) << 32);
			v[n++] = d | ~f->rules[i].cmp[k].mask;
			v[n++] = d ^ 1;
		}
	return n;
}

static void against_libseccomp(bool restrict_ip, enum sandbox_mounts mounts)
{
	struct filter f;
	struct sock_fprog ours = {0}, theirs = {0};
	if (!ok(sandbox_filter_rules(&f, restrict_ip, mounts) == 0 &&
		    filter_compile(&f, &ours) == 0 && libseccomp_program(&f, &theirs) == 0,
		"restrict_ip=%d mounts=%d: both programs built", restrict_ip, (int)mounts))
		return;
	static uint64_t vals[4096];
	size_t n_vals = argument_values(&f, vals, ELEMENTSOF(vals));
	static const uint32_t extra[] = {0x40000000, 0x40000001, 0x40000000 + __NR_openat,
					 0x7fffffff, 0xfffffffe, 0xffffffff};
	size_t tried = 0, differ = 0, bad = 0;
	for (size_t i = 0; i < BROKERED_NR_FUTURE_LIMIT + 32 + ELEMENTSOF(extra); i++) {
		uint32_t nr = i < BROKERED_NR_FUTURE_LIMIT + 32
				  ? (uint32_t)i
				  : extra[i - BROKERED_NR_FUTURE_LIMIT - 32];
		bool has_cmp = false;
		for (size_t k = 0; k < f.n; k++)
			has_cmp |= f.rules[k].nr == nr && f.rules[k].n_cmp;
		for (int arch = 0; arch < 2; arch++)
			for (int argno = 0; argno < (has_cmp && !arch ? 6 : 1); argno++)
				for (size_t j = 0; j < (has_cmp && !arch ? n_vals : 2); j++) {
					struct seccomp_data d = {.nr = (int)nr,
								 .arch = arch ? FOREIGN_AUDIT_ARCH
									      : NATIVE_AUDIT_ARCH};
					for (int a = 0; a < 6; a++)
						d.args[a] =
						    a == argno ? vals[j] : vals[(j + 1) % 2];
					uint32_t x = bpf_run(&ours, &d), y = bpf_run(&theirs, &d);
					tried++;
					bad += x == RUN_BAD || y == RUN_BAD;
					if (x != y && differ++ < 5)
						printf("# nr %#x arch %d arg%d=%#llx: ours %#x, "
						       "libseccomp's %#x\n",
						       nr, arch, argno,
						       (unsigned long long)d.args[argno], x, y);
				}
	}
	/* Both conditions of a two-condition rule at once (socket's family and type). */
	for (size_t k = 0; k < f.n; k++) {
		const struct filter_rule *rule = &f.rules[k];
		if (rule->n_cmp != 2)
			continue;
		for (int hi = 0; hi < 4; hi++) {
			struct seccomp_data d = {.nr = (int)rule->nr, .arch = NATIVE_AUDIT_ARCH};
			d.args[rule->cmp[0].arg] =
			    rule->cmp[0].datum | (hi & 1 ? UINT64_C(1) << 40 : 0);
			d.args[rule->cmp[1].arg] = rule->cmp[1].datum | (hi & 2 ? 0x80 : 0);
			uint32_t x = bpf_run(&ours, &d), y = bpf_run(&theirs, &d);
			tried++;
			if (x != y && differ++ < 5)
				printf(
				    "# nr %#x both conditions (%d): ours %#x, libseccomp's %#x\n",
				    rule->nr, hi, x, y);
		}
	}
	/* What a syscall without rules costs: read, close, fstat, mmap, a read-only openat. */
	static const int common[] = {__NR_read, __NR_close, __NR_fstat, __NR_mmap, __NR_openat};
	size_t steps[2] = {0};
	for (int which = 0; which < 2; which++)
		for (size_t k = 0; k < ELEMENTSOF(common); k++) {
			struct seccomp_data d = {.nr = common[k], .arch = NATIVE_AUDIT_ARCH};
			bpf_steps = 0;
			(void)bpf_run(which ? &theirs : &ours, &d);
			steps[which] += bpf_steps;
		}
	ok(steps[0] <= steps[1],
	   "restrict_ip=%d mounts=%d: read, close, fstat, mmap, openat(O_RDONLY) pass after %zu "
	   "instructions (libseccomp's: %zu)",
	   restrict_ip, (int)mounts, steps[0], steps[1]);
	is_int(bad, 0, "restrict_ip=%d mounts=%d: the interpreter knows every instruction",
	       restrict_ip, (int)mounts);
	is_int(differ, 0,
	       "restrict_ip=%d mounts=%d: brokered's program decides as libseccomp's on %zu "
	       "inputs (%u instructions against %u)",
	       restrict_ip, (int)mounts, tried, ours.len, theirs.len);
	free(ours.filter);
	free(theirs.filter);
	filter_done(&f);
}

static struct syscall_buffers *bufs;

/* A value for each kind of argument, and what the request must then hold. */
static char p1[] = "dir/one", p2[] = "two", tgt[] = "../target", xname[] = "user.test";
static char xvalue[] = "value", data[] = "hello";
static struct utimbuf ub = {.actime = 11, .modtime = 22};
static struct timeval tv[2] = {{33, 1}, {44, 999999}};
static struct timespec ts[2] = {{55, 5}, {66, UTIME_OMIT}};
static struct open_how how = {.flags = O_WRONLY | O_CREAT, .mode = 0640, .resolve = 0};
static struct sockaddr_un sun = {.sun_family = AF_UNIX, .sun_path = "/run/sock"};
static struct msghdr msg = {.msg_name = &sun, .msg_namelen = sizeof sun};
static struct {
	uint64_t value;
	uint32_t size, flags;
} xargs;

static uint64_t P(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* A valid FLAGS value for row: its first valid flag other than AT_EMPTY_PATH. */
static uint64_t some_flag(const struct syscall_row *row)
{
	uint64_t f = row->valid_flags & ~(uint64_t)AT_EMPTY_PATH;
	return f & -f;
}

static uint64_t value_for(const struct syscall_row *row, enum syscall_arg what)
{
	switch (what) {
	case SYSCALL_ARG_DIRFD:
		return 7;
	case SYSCALL_ARG_DIRFD2:
		return 8;
	case SYSCALL_ARG_FD:
		return 9;
	case SYSCALL_ARG_PATH:
	case SYSCALL_ARG_PATH_OR_EMPTY:
	case SYSCALL_ARG_PATH_OR_FD:
		return P(p1);
	case SYSCALL_ARG_PATH2:
		return P(p2);
	case SYSCALL_ARG_LINK_TARGET:
		return P(tgt);
	case SYSCALL_ARG_OPEN_FLAGS:
		return O_WRONLY | O_CREAT | O_EXCL | (UINT64_C(1) << 40); /* the top is ignored */
	case SYSCALL_ARG_FLAGS:
		return some_flag(row);
	case SYSCALL_ARG_MODE:
		return 0100644;
	case SYSCALL_ARG_PERM:
		return 0104755;
	case SYSCALL_ARG_DEV:
		return 0x1234;
	case SYSCALL_ARG_LENGTH:
		return 4242;
	case SYSCALL_ARG_UID:
		return 1000 | (UINT64_C(1) << 32);
	case SYSCALL_ARG_GID:
		return 1001;
	case SYSCALL_ARG_UTIMBUF:
		return P(&ub);
	case SYSCALL_ARG_TIMEVAL2:
		return P(tv);
	case SYSCALL_ARG_TIMESPEC2:
		return P(ts);
	case SYSCALL_ARG_OPEN_HOW:
		return P(&how);
	case SYSCALL_ARG_OPEN_HOW_SIZE:
		return sizeof how;
	case SYSCALL_ARG_XATTR_NAME:
		return P(xname);
	case SYSCALL_ARG_XATTR_VALUE:
		return P(xvalue);
	case SYSCALL_ARG_XATTR_SIZE:
		return 5;
	case SYSCALL_ARG_XATTR_FLAGS:
		return 1; /* XATTR_CREATE */
	case SYSCALL_ARG_XATTR_ARGS:
		return P(&xargs);
	case SYSCALL_ARG_XATTR_ARGS_SIZE:
		return sizeof xargs;
	case SYSCALL_ARG_SOCKADDR:
		return P(&sun);
	case SYSCALL_ARG_SOCKLEN:
		return sizeof sun;
	case SYSCALL_ARG_BUF:
		return P(data);
	case SYSCALL_ARG_BUF_LEN:
		return 5;
	case SYSCALL_ARG_MSGHDR:
		return P(&msg);
	case SYSCALL_ARG_VLEN:
		return 1;
	case SYSCALL_ARG_MSG_FLAGS:
		return MSG_DONTWAIT;
	case SYSCALL_ARG_ACCESS_MODE:
		return W_OK | X_OK;
	default:
		return 0xbad;
	}
}

static struct seccomp_data synthetic(const struct syscall_row *row)
{
	struct seccomp_data d = {.nr = syscall_row_nr(row), .arch = NATIVE_AUDIT_ARCH};
	for (size_t i = 0; i < ELEMENTSOF(row->args); i++)
		d.args[i] = value_for(row, row->args[i]);
	return d;
}

static bool has(const struct syscall_row *row, enum syscall_arg what)
{
	return syscall_row_arg(row, what) >= 0;
}

static bool same_str(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

/* What the request must hold after decoding synthetic(row); returns how many fields differ. */
static int differences(const struct syscall_row *row, const struct broker_req *q)
{
	int n = 0;
#define EXPECT(cond)                                                                               \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			printf("#   %s: not %s\n", row->name, #cond);                              \
			n++;                                                                       \
		}                                                                                  \
	} while (0)
	bool path = has(row, SYSCALL_ARG_PATH) || has(row, SYSCALL_ARG_PATH_OR_EMPTY) ||
		    has(row, SYSCALL_ARG_PATH_OR_FD);
	EXPECT(q->op == row->op && same_str(q->syscall_name, row->name));
	EXPECT(q->tid == gettid());
	EXPECT(q->dirfd == (has(row, SYSCALL_ARG_DIRFD) ? 7 : AT_FDCWD));
	EXPECT(q->dirfd2 == (has(row, SYSCALL_ARG_DIRFD2) ? 8 : AT_FDCWD));
	EXPECT(q->fd == (has(row, SYSCALL_ARG_FD) ? 9 : -1));
	EXPECT(path ? same_str(q->path, p1) && q->path != p1 : !q->path);
	EXPECT(has(row, SYSCALL_ARG_PATH2) ? same_str(q->path2, p2) : !q->path2);
	EXPECT(has(row, SYSCALL_ARG_LINK_TARGET) ? same_str(q->symlink_target, tgt)
						 : !q->symlink_target);
	uint64_t flags = row->fixed_flags;
	if (has(row, SYSCALL_ARG_OPEN_FLAGS))
		flags |= O_WRONLY | O_CREAT | O_EXCL;
	if (has(row, SYSCALL_ARG_FLAGS))
		flags |= some_flag(row);
	if (has(row, SYSCALL_ARG_OPEN_HOW))
		flags = how.flags;
	EXPECT(q->flags == flags);
	mode_t mode = has(row, SYSCALL_ARG_MODE)	  ? 0100644
		      : has(row, SYSCALL_ARG_PERM)	  ? 04755
		      : has(row, SYSCALL_ARG_OPEN_HOW)	  ? 0640
		      : has(row, SYSCALL_ARG_ACCESS_MODE) ? W_OK | X_OK
							  : 0;
	EXPECT(q->mode == mode);
	EXPECT(q->dev == (has(row, SYSCALL_ARG_DEV) ? 0x1234 : 0));
	EXPECT(q->length == (has(row, SYSCALL_ARG_LENGTH) ? 4242 : 0));
	EXPECT(q->uid == (has(row, SYSCALL_ARG_UID) ? 1000 : 0));
	EXPECT(q->gid == (has(row, SYSCALL_ARG_GID) ? 1001 : 0));
	EXPECT(!q->times_now && !q->at_empty_path);
	if (has(row, SYSCALL_ARG_UTIMBUF))
		EXPECT(q->times[0].tv_sec == 11 && q->times[1].tv_sec == 22 &&
		       q->times[0].tv_nsec == 0);
	else if (has(row, SYSCALL_ARG_TIMEVAL2))
		EXPECT(q->times[0].tv_sec == 33 && q->times[0].tv_nsec == 1000 &&
		       q->times[1].tv_sec == 44 && q->times[1].tv_nsec == 999999000);
	else if (has(row, SYSCALL_ARG_TIMESPEC2))
		EXPECT(memcmp(q->times, ts, sizeof ts) == 0);
	else
		EXPECT(q->times[0].tv_sec == 0 && q->times[1].tv_nsec == 0);
	EXPECT(has(row, SYSCALL_ARG_XATTR_NAME) ? same_str(q->xattr_name, xname) : !q->xattr_name);
	bool value = has(row, SYSCALL_ARG_XATTR_VALUE) || has(row, SYSCALL_ARG_XATTR_ARGS);
	EXPECT(value ? q->xattr_size == 5 && q->xattr_value &&
			   memcmp(q->xattr_value, xvalue, 5) == 0 && q->xattr_flags == 1
		     : !q->xattr_value && !q->xattr_size);
	bool addr = has(row, SYSCALL_ARG_SOCKADDR) || has(row, SYSCALL_ARG_MSGHDR);
	EXPECT(addr ? q->addr && q->addrlen == sizeof sun && memcmp(q->addr, &sun, sizeof sun) == 0
		    : !q->addr);
	EXPECT(q->msg_flags == (has(row, SYSCALL_ARG_MSG_FLAGS) ? MSG_DONTWAIT : 0));
	EXPECT(q->data == (has(row, SYSCALL_ARG_BUF)	  ? P(data)
			   : has(row, SYSCALL_ARG_MSGHDR) ? P(&msg)
							  : 0));
	EXPECT(q->data_len == (has(row, SYSCALL_ARG_BUF_LEN) ? 5 : 0));
	EXPECT(q->mmsg == has(row, SYSCALL_ARG_VLEN));
#undef EXPECT
	return n;
}

static int decode_row(const struct syscall_row *row, struct broker_req *q)
{
	struct seccomp_data d = synthetic(row);
	return syscall_decode(bufs, &d, gettid(), q);
}

static void decode_rows(void)
{
	xargs.value = P(xvalue);
	xargs.size = 5;
	xargs.flags = 1;
	for (size_t i = 0; i < syscall_table_size; i++) {
		const struct syscall_row *row = &syscall_table[i];
		if (syscall_row_nr(row) < 0)
			continue;
		struct broker_req q;
		int r = decode_row(row, &q);
		is_int(r,
		       row->op == SYSCALL_OP_CHROOT   ? SYSCALL_DECODE_CHROOT
		       : row->op == SYSCALL_OP_ACCESS ? SYSCALL_DECODE_ACCESS
		       : row->op == SYSCALL_OP_SYNC   ? SYSCALL_DECODE_CONTINUE
						      : 0,
		       "decode %s", row->name);
		is_int(differences(row, &q), 0, "decode %s: the request holds its arguments",
		       row->name);
	}
	struct broker_req q;
	struct seccomp_data d = {.nr = __NR_getpid, .arch = NATIVE_AUDIT_ARCH};
	is_int(syscall_decode(bufs, &d, gettid(), &q), -EPERM, "a syscall not in the table: EPERM");
}

/* Decode row name with argument what set to v (all others as in synthetic()). */
static int decode_with(const char *name, enum syscall_arg what, uint64_t v, struct broker_req *q)
{
	const struct syscall_row *row = NULL;
	for (size_t i = 0; i < syscall_table_size; i++)
		if (strcmp(syscall_table[i].name, name) == 0)
			row = &syscall_table[i];
	if (!row || syscall_row_nr(row) < 0 || syscall_row_arg(row, what) < 0)
		abort();
	struct seccomp_data d = synthetic(row);
	d.args[syscall_row_arg(row, what)] = v;
	return syscall_decode(bufs, &d, gettid(), q);
}

/* The kernel's answers to invalid arguments, given before anything reaches the broker. */
static void decode_errors(void)
{
	struct broker_req q;
	for (size_t i = 0; i < syscall_table_size; i++) {
		const struct syscall_row *row = &syscall_table[i];
		if (syscall_row_nr(row) < 0 || !has(row, SYSCALL_ARG_FLAGS))
			continue;
		uint64_t bad = ~row->valid_flags & (row->valid_flags << 1 | 0x80000000u);
		is_int(decode_with(row->name, SYSCALL_ARG_FLAGS, bad & -bad, &q), -EINVAL,
		       "%s: an unknown flag: EINVAL", row->name);
		if (has(row, SYSCALL_ARG_PATH))
			is_int(decode_with(row->name, SYSCALL_ARG_PATH, 8, &q), -EFAULT,
			       "%s: an unreadable path: EFAULT", row->name);
	}
	is_int(decode_with("renameat2", SYSCALL_ARG_FLAGS, RENAME_NOREPLACE | RENAME_EXCHANGE, &q),
	       -EINVAL, "renameat2: NOREPLACE with EXCHANGE: EINVAL");
	is_int(decode_with("renameat2", SYSCALL_ARG_FLAGS, RENAME_EXCHANGE | RENAME_WHITEOUT, &q),
	       -EINVAL, "renameat2: EXCHANGE with WHITEOUT: EINVAL");
	is_int(decode_with("renameat2", SYSCALL_ARG_FLAGS, RENAME_EXCHANGE, &q), 0,
	       "renameat2: EXCHANGE alone is fine");
	is_int(decode_with("faccessat2", SYSCALL_ARG_ACCESS_MODE, W_OK | 010, &q), -EINVAL,
	       "faccessat2: a mode bit beyond R_OK | W_OK | X_OK: EINVAL");
	is_int(decode_with("faccessat2", SYSCALL_ARG_FLAGS, AT_SYMLINK_FOLLOW, &q), -EINVAL,
	       "faccessat2: a flag it does not know: EINVAL");

	/* openat2 */
	struct open_how ro = {.flags = O_RDONLY | O_CLOEXEC};
	is_int(decode_with("openat2", SYSCALL_ARG_OPEN_HOW, P(&ro), &q), SYSCALL_DECODE_CONTINUE,
	       "openat2 read-only: the kernel runs it");
	struct open_how cached = {.flags = O_WRONLY, .resolve = RESOLVE_CACHED};
	is_int(decode_with("openat2", SYSCALL_ARG_OPEN_HOW, P(&cached), &q), -EAGAIN,
	       "openat2 RESOLVE_CACHED for a write: EAGAIN");
	struct open_how moded = {.flags = O_WRONLY, .mode = 0644};
	is_int(decode_with("openat2", SYSCALL_ARG_OPEN_HOW, P(&moded), &q), -EINVAL,
	       "openat2 a mode without O_CREAT: EINVAL");
	is_int(decode_with("openat2", SYSCALL_ARG_OPEN_HOW_SIZE, sizeof how - 1, &q), -EINVAL,
	       "openat2 a short open_how: EINVAL");
	struct {
		struct open_how h;
		uint64_t more;
	} big = {how, 0};
	is_int(decode_with("openat2", SYSCALL_ARG_OPEN_HOW, P(&big), &q), 0,
	       "openat2 a larger open_how with a zero tail: fine");
	big.more = 1;
	const struct syscall_row *o2 = syscall_table_find(__NR_openat2);
	struct seccomp_data d = synthetic(o2);
	d.args[syscall_row_arg(o2, SYSCALL_ARG_OPEN_HOW)] = P(&big);
	d.args[syscall_row_arg(o2, SYSCALL_ARG_OPEN_HOW_SIZE)] = sizeof big;
	is_int(syscall_decode(bufs, &d, gettid(), &q), -E2BIG,
	       "openat2 a larger open_how with a non-zero tail: E2BIG");

	/* paths that may be NULL */
	is_int(decode_with("fchmodat", SYSCALL_ARG_PATH_OR_EMPTY, 0, &q), -EFAULT,
	       "fchmodat NULL path: EFAULT");
	const struct syscall_row *f2 = syscall_table_find(__NR_fchmodat2);
	d = synthetic(f2);
	d.args[syscall_row_arg(f2, SYSCALL_ARG_PATH_OR_EMPTY)] = 0;
	d.args[syscall_row_arg(f2, SYSCALL_ARG_FLAGS)] = AT_EMPTY_PATH;
	ok(syscall_decode(bufs, &d, gettid(), &q) == 0 && q.at_empty_path && !q.path &&
	       q.dirfd == 7,
	   "fchmodat2 NULL path with AT_EMPTY_PATH: the dirfd itself");
	is_int(decode_with("utimensat", SYSCALL_ARG_PATH_OR_FD, 0, &q), 0,
	       "utimensat NULL path: fine (futimens)");
	ok(q.at_empty_path && !q.path && q.dirfd == 7, "utimensat NULL path: the dirfd itself");
	is_int(decode_with("utimensat", SYSCALL_ARG_DIRFD, (uint32_t)AT_FDCWD, &q), 0,
	       "utimensat a path at AT_FDCWD: fine");
	const struct syscall_row *un = syscall_table_find(__NR_utimensat);
	d = synthetic(un);
	d.args[syscall_row_arg(un, SYSCALL_ARG_PATH_OR_FD)] = 0;
	d.args[syscall_row_arg(un, SYSCALL_ARG_DIRFD)] = (uint32_t)AT_FDCWD;
	is_int(syscall_decode(bufs, &d, gettid(), &q), -EFAULT,
	       "utimensat NULL path at AT_FDCWD: EFAULT");
	is_int(decode_with("utimensat", SYSCALL_ARG_TIMESPEC2, 0, &q), 0, "utimensat NULL times");
	ok(q.times_now, "utimensat NULL times: now");
	struct timespec badts[2] = {{1, 1000000000}, {2, 0}};
	is_int(decode_with("utimensat", SYSCALL_ARG_TIMESPEC2, P(badts), &q), -EINVAL,
	       "utimensat tv_nsec out of range: EINVAL");

	/* xattrs */
	is_int(decode_with("setxattr", SYSCALL_ARG_XATTR_NAME, P(""), &q), -ERANGE,
	       "setxattr empty name: ERANGE");
	char longname[300];
	memset(longname, 'n', sizeof longname - 1);
	longname[sizeof longname - 1] = '\0';
	is_int(decode_with("removexattr", SYSCALL_ARG_XATTR_NAME, P(longname), &q), -ERANGE,
	       "removexattr a name over 255 bytes: ERANGE");
	is_int(decode_with("fsetxattr", SYSCALL_ARG_XATTR_SIZE, 65537, &q), -E2BIG,
	       "fsetxattr a value over 64 KiB: E2BIG");
	is_int(decode_with("setxattrat", SYSCALL_ARG_XATTR_ARGS_SIZE, 8, &q), -EINVAL,
	       "setxattrat a short xattr_args: EINVAL");

	/* sockets */
	is_int(decode_with("sendmmsg", SYSCALL_ARG_VLEN, 0, &q), SYSCALL_DECODE_CONTINUE,
	       "sendmmsg no message: the kernel answers");
	is_int(decode_with("connect", SYSCALL_ARG_SOCKLEN, sizeof(struct sockaddr_storage) + 1, &q),
	       -EINVAL, "connect an address longer than sockaddr_storage: EINVAL");
	is_int(decode_with("sendto", SYSCALL_ARG_SOCKADDR, 0, &q), 0, "sendto without address");
	ok(!q.addr && q.data == P(data), "sendto without address: no address, the data");
}

int main(void)
{
	numbers();
	shapes();
	filter(false, false);
	filter(true, false);
	filter(false, true);
	filter(true, true);
	filter_copy_on_write(false);
	filter_copy_on_write(true);
	for (int mounts = SANDBOX_MOUNTS_SHARED; mounts <= SANDBOX_MOUNTS_COPY_ON_WRITE; mounts++) {
		against_libseccomp(false, (enum sandbox_mounts)mounts);
		against_libseccomp(true, (enum sandbox_mounts)mounts);
	}
	if (syscall_buffers_new(&bufs) < 0)
		abort();
	decode_rows();
	decode_errors();
	syscall_buffers_free(bufs);
	return tap_done();
}
