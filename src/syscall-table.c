/* SPDX-License-Identifier: MIT */
#include "syscall-table.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>
#include <utime.h>

#include "basic/kernel-compat.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "proc.h"

/* ARGS(DIRFD, PATH, ...): the arguments in order, like the syscall's signature. */
#define ARG_(x)				 SYSCALL_ARG_##x
#define ARGS1_(a)			 ARG_(a)
#define ARGS2_(a, ...)			 ARG_(a), ARGS1_(__VA_ARGS__)
#define ARGS3_(a, ...)			 ARG_(a), ARGS2_(__VA_ARGS__)
#define ARGS4_(a, ...)			 ARG_(a), ARGS3_(__VA_ARGS__)
#define ARGS5_(a, ...)			 ARG_(a), ARGS4_(__VA_ARGS__)
#define ARGS6_(a, ...)			 ARG_(a), ARGS5_(__VA_ARGS__)
#define NARGS_(a, b, c, d, e, f, n, ...) n
#define CAT_(a, b)			 a##b
#define XCAT_(a, b)			 CAT_(a, b)
#define ARGS(...)                                                                                  \
	.args = {XCAT_(XCAT_(ARGS, NARGS_(__VA_ARGS__, 6, 5, 4, 3, 2, 1)), _)(__VA_ARGS__)}

/* name, number on x86_64 and on aarch64 (-1: none there), operation */
#define ROW(nm, nr_x86, nr_arm, o)                                                                 \
	.name = #nm, .nr_x86_64 = (nr_x86), .nr_aarch64 = (nr_arm), .op = (o)
#define AT_PATH_FLAGS (AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)

/*
 * Every syscall the filter notifies. The numbers are the kernel's (arch/x86/entry/syscalls/
 * syscall_64.tbl, include/uapi/asm-generic/unistd.h); since 5.1 new syscalls share one number.
 * aarch64 never had the path calls that predate the *at forms. The unit test checks each number
 * against libseccomp's tables for both architectures.
 */
const struct syscall_row syscall_table[] = {
    /* open: the broker opens, the fd is installed in the target */
    {ROW(open, 2, -1, BROKER_OP_OPEN), ARGS(PATH, OPEN_FLAGS, MODE),
     .notify = SYSCALL_NOTIFY_WRITE_FLAGS},
    {ROW(openat, 257, 56, BROKER_OP_OPEN), ARGS(DIRFD, PATH, OPEN_FLAGS, MODE),
     .notify = SYSCALL_NOTIFY_WRITE_FLAGS},
    {ROW(creat, 85, -1, BROKER_OP_OPEN), ARGS(PATH, MODE),
     .fixed_flags = O_CREAT | O_WRONLY | O_TRUNC},
    /* its flags are in memory the filter cannot read: always notified */
    {ROW(openat2, 437, 437, BROKER_OP_OPEN), ARGS(DIRFD, PATH, OPEN_HOW, OPEN_HOW_SIZE)},
    {ROW(truncate, 76, 45, BROKER_OP_TRUNCATE), ARGS(PATH, LENGTH)},
    {ROW(rename, 82, -1, BROKER_OP_RENAME), ARGS(PATH, PATH2)},
    {ROW(renameat, 264, 38, BROKER_OP_RENAME), ARGS(DIRFD, PATH, DIRFD2, PATH2)},
    {ROW(renameat2, 316, 276, BROKER_OP_RENAME), ARGS(DIRFD, PATH, DIRFD2, PATH2, FLAGS),
     .valid_flags = RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT},
    {ROW(unlink, 87, -1, BROKER_OP_UNLINK), ARGS(PATH)},
    {ROW(rmdir, 84, -1, BROKER_OP_UNLINK), ARGS(PATH), .fixed_flags = AT_REMOVEDIR},
    {ROW(unlinkat, 263, 35, BROKER_OP_UNLINK), ARGS(DIRFD, PATH, FLAGS),
     .valid_flags = AT_REMOVEDIR},
    {ROW(mkdir, 83, -1, BROKER_OP_MKDIR), ARGS(PATH, MODE)},
    {ROW(mkdirat, 258, 34, BROKER_OP_MKDIR), ARGS(DIRFD, PATH, MODE)},
    {ROW(mknod, 133, -1, BROKER_OP_MKNOD), ARGS(PATH, MODE, DEV)},
    {ROW(mknodat, 259, 33, BROKER_OP_MKNOD), ARGS(DIRFD, PATH, MODE, DEV)},
    {ROW(link, 86, -1, BROKER_OP_LINK), ARGS(PATH, PATH2)},
    {ROW(linkat, 265, 37, BROKER_OP_LINK), ARGS(DIRFD, PATH, DIRFD2, PATH2, FLAGS),
     .valid_flags = AT_SYMLINK_FOLLOW | AT_EMPTY_PATH},
    {ROW(symlink, 88, -1, BROKER_OP_SYMLINK), ARGS(LINK_TARGET, PATH2)},
    {ROW(symlinkat, 266, 36, BROKER_OP_SYMLINK), ARGS(LINK_TARGET, DIRFD2, PATH2)},
    {ROW(chmod, 90, -1, BROKER_OP_CHMOD), ARGS(PATH, PERM)},
    {ROW(fchmod, 91, 52, BROKER_OP_CHMOD), ARGS(FD, PERM), .notify = SYSCALL_NOTIFY_UNLESS_RO},
    {ROW(fchmodat, 268, 53, BROKER_OP_CHMOD), ARGS(DIRFD, PATH_OR_EMPTY, PERM)},
    {ROW(fchmodat2, 452, 452, BROKER_OP_CHMOD), ARGS(DIRFD, PATH_OR_EMPTY, PERM, FLAGS),
     .valid_flags = AT_PATH_FLAGS},
    {ROW(chown, 92, -1, BROKER_OP_CHOWN), ARGS(PATH, UID, GID)},
    {ROW(lchown, 94, -1, BROKER_OP_CHOWN), ARGS(PATH, UID, GID),
     .fixed_flags = AT_SYMLINK_NOFOLLOW},
    {ROW(fchown, 93, 55, BROKER_OP_CHOWN), ARGS(FD, UID, GID), .notify = SYSCALL_NOTIFY_UNLESS_RO},
    {ROW(fchownat, 260, 54, BROKER_OP_CHOWN), ARGS(DIRFD, PATH, UID, GID, FLAGS),
     .valid_flags = AT_PATH_FLAGS},
    {ROW(utime, 132, -1, BROKER_OP_UTIMES), ARGS(PATH, UTIMBUF)},
    {ROW(utimes, 235, -1, BROKER_OP_UTIMES), ARGS(PATH, TIMEVAL2)},
    {ROW(futimesat, 261, -1, BROKER_OP_UTIMES), ARGS(DIRFD, PATH_OR_FD, TIMEVAL2),
     .notify = SYSCALL_NOTIFY_PATH_UNLESS_RO},
    {ROW(utimensat, 280, 88, BROKER_OP_UTIMES), ARGS(DIRFD, PATH_OR_FD, TIMESPEC2, FLAGS),
     .valid_flags = AT_PATH_FLAGS, .notify = SYSCALL_NOTIFY_PATH_UNLESS_RO},
    {ROW(setxattr, 188, 5, BROKER_OP_SETXATTR),
     ARGS(PATH, XATTR_NAME, XATTR_VALUE, XATTR_SIZE, XATTR_FLAGS)},
    {ROW(lsetxattr, 189, 6, BROKER_OP_SETXATTR),
     ARGS(PATH, XATTR_NAME, XATTR_VALUE, XATTR_SIZE, XATTR_FLAGS),
     .fixed_flags = AT_SYMLINK_NOFOLLOW},
    {ROW(fsetxattr, 190, 7, BROKER_OP_SETXATTR),
     ARGS(FD, XATTR_NAME, XATTR_VALUE, XATTR_SIZE, XATTR_FLAGS),
     .notify = SYSCALL_NOTIFY_UNLESS_RO},
    {ROW(setxattrat, 463, 463, BROKER_OP_SETXATTR),
     ARGS(DIRFD, PATH, FLAGS, XATTR_NAME, XATTR_ARGS, XATTR_ARGS_SIZE),
     .valid_flags = AT_PATH_FLAGS},
    {ROW(removexattr, 197, 14, BROKER_OP_REMOVEXATTR), ARGS(PATH, XATTR_NAME)},
    {ROW(lremovexattr, 198, 15, BROKER_OP_REMOVEXATTR), ARGS(PATH, XATTR_NAME),
     .fixed_flags = AT_SYMLINK_NOFOLLOW},
    {ROW(fremovexattr, 199, 16, BROKER_OP_REMOVEXATTR), ARGS(FD, XATTR_NAME),
     .notify = SYSCALL_NOTIFY_UNLESS_RO},
    {ROW(removexattrat, 466, 466, BROKER_OP_REMOVEXATTR), ARGS(DIRFD, PATH, FLAGS, XATTR_NAME),
     .valid_flags = AT_PATH_FLAGS},
    /* refused, except chroot("/") by a task that may chroot: see the supervisor */
    {ROW(chroot, 161, 51, SYSCALL_OP_CHROOT), ARGS(PATH)},
    /* with read-only mounts, a write access check: the supervisor answers it */
    {ROW(access, 21, -1, SYSCALL_OP_ACCESS), ARGS(PATH, ACCESS_MODE),
     .notify = SYSCALL_NOTIFY_RO_WRITE_ACCESS},
    {ROW(faccessat, 269, 48, SYSCALL_OP_ACCESS), ARGS(DIRFD, PATH, ACCESS_MODE),
     .notify = SYSCALL_NOTIFY_RO_WRITE_ACCESS},
    {ROW(faccessat2, 439, 439, SYSCALL_OP_ACCESS), ARGS(DIRFD, PATH_OR_EMPTY, ACCESS_MODE, FLAGS),
     .valid_flags = AT_EACCESS | AT_PATH_FLAGS, .notify = SYSCALL_NOTIFY_RO_WRITE_ACCESS},
    /* copy-on-write: syncs the volatile overlay skips, and those that sync the upper layer
     * itself (sync, msync) but not what the merge does with it: the run syncs once at its end */
    {ROW(sync, 162, 81, SYSCALL_OP_SYNC), ARGS(NONE), .notify = SYSCALL_NOTIFY_COW_SYNC},
    {ROW(msync, 26, 227, SYSCALL_OP_SYNC), ARGS(NONE, NONE, SYNC_FLAGS),
     .notify = SYSCALL_NOTIFY_COW_SYNC, .sync_flags = MS_SYNC},
    {ROW(fsync, 74, 82, SYSCALL_OP_SYNC), ARGS(FD), .notify = SYSCALL_NOTIFY_COW_SYNC},
    {ROW(fdatasync, 75, 83, SYSCALL_OP_SYNC), ARGS(FD), .notify = SYSCALL_NOTIFY_COW_SYNC},
    {ROW(syncfs, 306, 267, SYSCALL_OP_SYNC), ARGS(FD), .notify = SYSCALL_NOTIFY_COW_SYNC},
    {ROW(pwritev2, 328, 287, SYSCALL_OP_SYNC), ARGS(FD, NONE, NONE, NONE, NONE, SYNC_FLAGS),
     .notify = SYSCALL_NOTIFY_COW_SYNC, .sync_flags = RWF_DSYNC | RWF_SYNC},
    /* Linux AIO: IOCB_CMD_FSYNC, RWF_DSYNC in an iocb (memory the filter cannot read) */
    {ROW(io_submit, 209, 2, SYSCALL_OP_SYNC), ARGS(NONE), .notify = SYSCALL_NOTIFY_COW_SYNC},
    /* sockets (DESIGN section 12): the address is in memory, the broker decides on it */
    {ROW(connect, 42, 203, BROKER_OP_CONNECT), ARGS(FD, SOCKADDR, SOCKLEN)},
    {ROW(bind, 49, 200, BROKER_OP_BIND), ARGS(FD, SOCKADDR, SOCKLEN)},
    {ROW(sendto, 44, 206, BROKER_OP_SENDTO), ARGS(FD, BUF, BUF_LEN, MSG_FLAGS, SOCKADDR, SOCKLEN),
     .notify = SYSCALL_NOTIFY_SOCKADDR},
    {ROW(sendmsg, 46, 211, BROKER_OP_SENDMSG), ARGS(FD, MSGHDR, MSG_FLAGS)},
    {ROW(sendmmsg, 307, 269, BROKER_OP_SENDMSG), ARGS(FD, MSGHDR, VLEN, MSG_FLAGS)},
};
const size_t syscall_table_size = ELEMENTSOF(syscall_table);

int syscall_row_arg(const struct syscall_row *row, enum syscall_arg what)
{
	for (int i = 0; i < (int)ELEMENTSOF(row->args); i++)
		if (row->args[i] == what)
			return i;
	return -1;
}

const struct syscall_row *syscall_table_find(int nr)
{
	if (nr < 0)
		return NULL;
	for (size_t i = 0; i < syscall_table_size; i++)
		if (syscall_row_nr(&syscall_table[i]) == nr)
			return &syscall_table[i];
	return NULL;
}

/* ---- decoding ---- */

#define XATTR_NAME_MAX_ 255
#define XATTR_SIZE_MAX_ 65536

struct syscall_buffers {
	char path1[BROKERED_PATH_MAX], path2[BROKERED_PATH_MAX], path3[BROKERED_PATH_MAX];
	char xname[XATTR_NAME_MAX_ + 1];
	unsigned char xvalue[XATTR_SIZE_MAX_];
	struct sockaddr_storage sockaddr; /* connect, bind, sendto, msg_name */
};

int syscall_buffers_new(struct syscall_buffers **ret)
{
	*ret = malloc(sizeof **ret);
	return *ret ? 0 : -ENOMEM;
}

void syscall_buffers_free(struct syscall_buffers *b)
{
	free(b);
}

/* One notification being decoded: its row, its arguments by position and by what they are. */
struct decoding {
	const struct syscall_row *row;
	const uint64_t *a;
	int at[_SYSCALL_ARG_MAX]; /* position of each kind of argument, -1: none */
	pid_t tid;
	struct syscall_buffers *b;
	struct broker_req *q;
};

static bool has(const struct decoding *d, enum syscall_arg what)
{
	return d->at[what] >= 0;
}

static uint64_t arg(const struct decoding *d, enum syscall_arg what)
{
	return has(d, what) ? d->a[d->at[what]] : 0;
}

/* The arguments passed in registers, as the kernel takes them (int, unsigned int, ...). */
static void decode_scalars(struct decoding *d)
{
	struct broker_req *q = d->q;
	for (size_t i = 0; i < ELEMENTSOF(d->row->args); i++) {
		uint64_t v = d->a[i];
		switch (d->row->args[i]) {
		case SYSCALL_ARG_DIRFD:
			q->dirfd = (int)v;
			break;
		case SYSCALL_ARG_DIRFD2:
			q->dirfd2 = (int)v;
			break;
		case SYSCALL_ARG_FD:
			q->fd = (int)v;
			break;
		case SYSCALL_ARG_OPEN_FLAGS:
		case SYSCALL_ARG_FLAGS:
			q->flags = (uint32_t)v;
			break;
		case SYSCALL_ARG_MODE:
			q->mode = (mode_t)v;
			break;
		case SYSCALL_ARG_PERM:
			q->mode = (mode_t)v & 07777;
			break;
		case SYSCALL_ARG_ACCESS_MODE:
			q->mode = (mode_t)v;
			break;
		case SYSCALL_ARG_DEV:
			q->dev = (dev_t)v;
			break;
		case SYSCALL_ARG_LENGTH:
			q->length = v;
			break;
		case SYSCALL_ARG_UID:
			q->uid = (uid_t)(uint32_t)v;
			break;
		case SYSCALL_ARG_GID:
			q->gid = (gid_t)(uint32_t)v;
			break;
		case SYSCALL_ARG_XATTR_SIZE:
			q->xattr_size = (size_t)v;
			break;
		case SYSCALL_ARG_XATTR_FLAGS:
			q->xattr_flags = (int)v;
			break;
		case SYSCALL_ARG_BUF:
		case SYSCALL_ARG_MSGHDR:
			q->data = v;
			break;
		case SYSCALL_ARG_BUF_LEN:
			q->data_len = v;
			break;
		case SYSCALL_ARG_VLEN:
			q->mmsg = true;
			break;
		case SYSCALL_ARG_MSG_FLAGS:
			q->msg_flags = (int)v;
			break;
		default: /* pointers: read later, in order */
			break;
		}
	}
	q->flags |= d->row->fixed_flags;
}

/* The kernel refuses unknown flags before it reads any path. */
static int check_flags(const struct decoding *d)
{
	uint64_t f = d->q->flags;
	if (has(d, SYSCALL_ARG_FLAGS) && (f & ~d->row->valid_flags))
		return -EINVAL;
	if (has(d, SYSCALL_ARG_ACCESS_MODE) && (d->q->mode & ~(mode_t)(R_OK | W_OK | X_OK)))
		return -EINVAL;
	if (d->row->op == BROKER_OP_RENAME &&
	    (((f & RENAME_NOREPLACE) && (f & (RENAME_EXCHANGE | RENAME_WHITEOUT))) ||
	     ((f & RENAME_EXCHANGE) && (f & RENAME_WHITEOUT))))
		return -EINVAL;
	return 0;
}

/* openat2: struct open_how, which may be larger than ours if its tail is zero. */
static int read_open_how(struct decoding *d)
{
	struct broker_req *q = d->q;
	uint64_t addr = arg(d, SYSCALL_ARG_OPEN_HOW);
	size_t size = (size_t)arg(d, SYSCALL_ARG_OPEN_HOW_SIZE);
	struct open_how how = {0};
	int r;
	if (size < sizeof how)
		return -EINVAL;
	if (size > 4096)
		return -E2BIG;
	if ((r = proc_read_mem(d->tid, addr, &how, sizeof how)) < 0)
		return r;
	/* Unknown trailing fields must be zero, as the kernel demands. */
	unsigned char tail[256];
	for (size_t off = sizeof how; off < size;) {
		size_t n = MIN(sizeof tail, size - off);
		if ((r = proc_read_mem(d->tid, addr + off, tail, n)) < 0)
			return r;
		for (size_t i = 0; i < n; i++)
			if (tail[i])
				return -E2BIG;
		off += n;
	}
	if (how.flags >> 32)
		return -EINVAL;
	q->flags = how.flags;
	q->mode = (mode_t)how.mode;
	q->resolve = how.resolve;
	if (!(q->flags & SYSCALL_OPEN_WRITE_FLAGS))
		return SYSCALL_DECODE_CONTINUE; /* read-only: Landlock allows reads, the kernel does
						   the rest */
	if (how.mode && !(q->flags & (O_CREAT | 020000000)))
		return -EINVAL;
	if (q->resolve & RESOLVE_CACHED)
		return -EAGAIN; /* the caller retries without it */
	return 0;
}

static int read_path(struct decoding *d, uint64_t addr, char *buf, const char **ret)
{
	int r = proc_read_string(d->tid, addr, buf, BROKERED_PATH_MAX, NULL);
	if (r < 0)
		return r;
	*ret = buf;
	return 0;
}

/* The first path; with AT_EMPTY_PATH, "" (or NULL where allowed) means the dirfd itself. */
static int read_path1(struct decoding *d, enum syscall_arg what, uint64_t addr)
{
	struct broker_req *q = d->q;
	if (addr || what == SYSCALL_ARG_PATH) {
		int r = read_path(d, addr, d->b->path1, &q->path);
		if (r < 0)
			return r;
	} else if (what == SYSCALL_ARG_PATH_OR_FD) {
		q->at_empty_path = true;
		return q->dirfd == AT_FDCWD ? -EFAULT : 0;
	} else if (!(q->flags & AT_EMPTY_PATH)) {
		return -EFAULT;
	}
	if (d->row->valid_flags & AT_EMPTY_PATH)
		q->at_empty_path = (q->flags & AT_EMPTY_PATH) && (!q->path || !*q->path);
	return 0;
}

/* utime, utimes, futimesat, utimensat: NULL times mean now. */
static int read_times(struct decoding *d, enum syscall_arg what, uint64_t addr)
{
	struct broker_req *q = d->q;
	int r;
	if (!addr) {
		q->times_now = true;
		return 0;
	}
	if (what == SYSCALL_ARG_UTIMBUF) {
		struct utimbuf ub;
		if ((r = proc_read_mem(d->tid, addr, &ub, sizeof ub)) < 0)
			return r;
		q->times[0] = (struct timespec){ub.actime, 0};
		q->times[1] = (struct timespec){ub.modtime, 0};
		return 0;
	}
	if (what == SYSCALL_ARG_TIMEVAL2) {
		struct timeval tv[2];
		if ((r = proc_read_mem(d->tid, addr, tv, sizeof tv)) < 0)
			return r;
		for (int i = 0; i < 2; i++) {
			if (tv[i].tv_usec < 0 || tv[i].tv_usec >= 1000000)
				return -EINVAL;
			q->times[i] = (struct timespec){tv[i].tv_sec, tv[i].tv_usec * 1000};
		}
		return 0;
	}
	if ((r = proc_read_mem(d->tid, addr, q->times, sizeof q->times)) < 0)
		return r;
	for (int i = 0; i < 2; i++) {
		long ns = q->times[i].tv_nsec;
		if (ns != UTIME_NOW && ns != UTIME_OMIT && (ns < 0 || ns >= 1000000000))
			return -EINVAL;
	}
	return 0;
}

static int read_xattr_name(struct decoding *d, uint64_t addr)
{
	size_t n;
	int r = proc_read_string(d->tid, addr, d->b->xname, sizeof d->b->xname, &n);
	if (r == -ENAMETOOLONG || (r == 0 && n == 0))
		return -ERANGE;
	if (r < 0)
		return r;
	d->q->xattr_name = d->b->xname;
	return 0;
}

/* The value of setxattr (size and flags in registers) or of setxattrat (in struct xattr_args). */
static int read_xattr_value(struct decoding *d, enum syscall_arg what, uint64_t addr)
{
	struct broker_req *q = d->q;
	int r;
	if (what == SYSCALL_ARG_XATTR_ARGS) {
		struct {
			uint64_t value;
			uint32_t size, flags;
		} xa;
		if (arg(d, SYSCALL_ARG_XATTR_ARGS_SIZE) < sizeof xa)
			return -EINVAL;
		if ((r = proc_read_mem(d->tid, addr, &xa, sizeof xa)) < 0)
			return r;
		addr = xa.value;
		q->xattr_size = xa.size;
		q->xattr_flags = (int)xa.flags;
	}
	if (q->xattr_size > XATTR_SIZE_MAX_)
		return -E2BIG;
	if (q->xattr_size && (r = proc_read_mem(d->tid, addr, d->b->xvalue, q->xattr_size)) < 0)
		return r;
	q->xattr_value = d->b->xvalue;
	return 0;
}

/* A socket address argument, copied once (the kernel's own limit: EINVAL beyond it). */
static int read_sockaddr(struct decoding *d, uint64_t addr, uint64_t len)
{
	struct sockaddr_storage *sa = &d->b->sockaddr;
	if (!addr || !len)
		return 0;
	if (len > sizeof *sa)
		return -EINVAL;
	memset(sa, 0, sizeof *sa);
	int r = proc_read_mem(d->tid, addr, sa, (size_t)len);
	if (r < 0)
		return r;
	d->q->addr = sa;
	d->q->addrlen = (unsigned)len;
	return 0;
}

static int read_msghdr_name(struct decoding *d, uint64_t addr)
{
	struct msghdr m;
	int r = proc_read_mem(d->tid, addr, &m, sizeof m);
	if (r < 0)
		return r;
	return m.msg_name ? read_sockaddr(d, (uint64_t)(uintptr_t)m.msg_name, m.msg_namelen) : 0;
}

/* The pointer arguments, in order: each is read once. */
static int read_pointer(struct decoding *d, enum syscall_arg what, uint64_t v)
{
	switch (what) {
	case SYSCALL_ARG_PATH:
	case SYSCALL_ARG_PATH_OR_EMPTY:
	case SYSCALL_ARG_PATH_OR_FD:
		return read_path1(d, what, v);
	case SYSCALL_ARG_PATH2:
		return read_path(d, v, d->b->path2, &d->q->path2);
	case SYSCALL_ARG_LINK_TARGET:
		return read_path(d, v, d->b->path3, &d->q->symlink_target);
	case SYSCALL_ARG_UTIMBUF:
	case SYSCALL_ARG_TIMEVAL2:
	case SYSCALL_ARG_TIMESPEC2:
		return read_times(d, what, v);
	case SYSCALL_ARG_XATTR_NAME:
		return read_xattr_name(d, v);
	case SYSCALL_ARG_XATTR_VALUE:
	case SYSCALL_ARG_XATTR_ARGS:
		return read_xattr_value(d, what, v);
	case SYSCALL_ARG_SOCKADDR:
		return read_sockaddr(d, v, arg(d, SYSCALL_ARG_SOCKLEN));
	case SYSCALL_ARG_MSGHDR:
		return read_msghdr_name(d, v);
	default: /* registers: decode_scalars(); open_how: read first */
		return 0;
	}
}

int syscall_decode(struct syscall_buffers *b, const struct seccomp_data *data, pid_t tid,
		   struct broker_req *q)
{
	*q = (struct broker_req){.tid = tid, .dirfd = AT_FDCWD, .dirfd2 = AT_FDCWD, .fd = -1};
	const struct syscall_row *row = syscall_table_find(data->nr);
	if (!row)
		return -EPERM; /* the filter notified something we do not know: fail closed */
	struct decoding d = {
	    .row = row, .a = (const uint64_t *)data->args, .tid = tid, .b = b, .q = q};
	for (size_t i = 0; i < ELEMENTSOF(d.at); i++)
		d.at[i] = syscall_row_arg(row, (enum syscall_arg)i);
	q->op = row->op;
	q->syscall_name = row->name;

	decode_scalars(&d);
	int r = check_flags(&d);
	if (r < 0)
		return r;
	if (row->op == SYSCALL_OP_SYNC)
		return SYSCALL_DECODE_CONTINUE; /* the kernel syncs (copy-on-write: noted first) */
	if (has(&d, SYSCALL_ARG_OPEN_HOW) && (r = read_open_how(&d)) != 0)
		return r;
	if (has(&d, SYSCALL_ARG_VLEN) && (uint32_t)arg(&d, SYSCALL_ARG_VLEN) == 0)
		return SYSCALL_DECODE_CONTINUE; /* no message: nothing is sent, the kernel answers 0
						 */
	for (size_t i = 0; i < ELEMENTSOF(row->args); i++)
		if ((r = read_pointer(&d, row->args[i], d.a[i])) < 0)
			return r;
	if (row->op == SYSCALL_OP_ACCESS)
		return SYSCALL_DECODE_ACCESS;
	return row->op == SYSCALL_OP_CHROOT ? SYSCALL_DECODE_CHROOT : 0;
}
