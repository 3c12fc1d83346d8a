/* SPDX-License-Identifier: MIT */
/*
 * The syscalls the seccomp filter hands to the supervisor, in one table (DESIGN section 3). The
 * filter is built from it (sandbox.c) and a notification is decoded by it (syscall_decode), so a
 * syscall cannot be notified without a decoder, nor decoded without being notified. A row gives the
 * number on each architecture, the broker operation, when the filter notifies, and what each of
 * the six arguments is; the decoder reads the arguments by what they are, once, into copies.
 */
#pragma once

#include <fcntl.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker.h"

/* What an argument is. Pointers are read from the target once; the rest are registers. */
enum syscall_arg {
	SYSCALL_ARG_NONE,	   /* not used */
	SYSCALL_ARG_DIRFD,	   /* directory fd of PATH */
	SYSCALL_ARG_PATH,	   /* the path acted on */
	SYSCALL_ARG_PATH_OR_EMPTY, /* PATH; NULL is "" if FLAGS has AT_EMPTY_PATH (6.11), else
				      EFAULT */
	SYSCALL_ARG_PATH_OR_FD, /* PATH; NULL means DIRFD itself, which then must not be AT_FDCWD */
	SYSCALL_ARG_DIRFD2,	/* directory fd of PATH2 */
	SYSCALL_ARG_PATH2,	/* rename and link: the destination; symlink: the link */
	SYSCALL_ARG_LINK_TARGET, /* symlink: its content */
	SYSCALL_ARG_FD,		 /* the fd acted on (fchmod, fsetxattr, sockets) */
	SYSCALL_ARG_OPEN_FLAGS,	 /* O_* flags (the filter looks at them) */
	SYSCALL_ARG_FLAGS,	 /* AT_* or RENAME_* flags, checked against the row's valid_flags */
	SYSCALL_ARG_MODE,	 /* creation mode and type */
	SYSCALL_ARG_PERM,	 /* chmod: permission bits (mode & 07777) */
	SYSCALL_ARG_DEV,
	SYSCALL_ARG_LENGTH,
	SYSCALL_ARG_UID,
	SYSCALL_ARG_GID,
	SYSCALL_ARG_UTIMBUF,	   /* struct utimbuf *, NULL: now */
	SYSCALL_ARG_TIMEVAL2,	   /* struct timeval[2], NULL: now */
	SYSCALL_ARG_TIMESPEC2,	   /* struct timespec[2], NULL: now */
	SYSCALL_ARG_OPEN_HOW,	   /* struct open_how * (openat2) */
	SYSCALL_ARG_OPEN_HOW_SIZE, /* its size */
	SYSCALL_ARG_XATTR_NAME,
	SYSCALL_ARG_XATTR_VALUE,
	SYSCALL_ARG_XATTR_SIZE,
	SYSCALL_ARG_XATTR_FLAGS,
	SYSCALL_ARG_XATTR_ARGS,	     /* struct xattr_args * (setxattrat): value, size, flags */
	SYSCALL_ARG_XATTR_ARGS_SIZE, /* its size */
	SYSCALL_ARG_SOCKADDR,	     /* a socket address, NULL: none */
	SYSCALL_ARG_SOCKLEN,	     /* its length */
	SYSCALL_ARG_BUF,	     /* sendto: the data, left in the target */
	SYSCALL_ARG_BUF_LEN,
	SYSCALL_ARG_MSGHDR, /* sendmsg: struct msghdr *; sendmmsg: the first struct mmsghdr */
	SYSCALL_ARG_VLEN,   /* sendmmsg: how many messages (0: nothing is sent) */
	SYSCALL_ARG_MSG_FLAGS,
	SYSCALL_ARG_ACCESS_MODE, /* access: R_OK | W_OK | X_OK, or F_OK */
	SYSCALL_ARG_SYNC_FLAGS,	 /* flags of which the row's sync_flags ask for a sync */
	_SYSCALL_ARG_MAX,
};

/* When the filter notifies the syscall; any other call of it runs in the kernel. */
enum syscall_notify {
	SYSCALL_NOTIFY_ALWAYS,
	SYSCALL_NOTIFY_WRITE_FLAGS, /* OPEN_FLAGS has a bit that writes, creates or truncates */
	SYSCALL_NOTIFY_SOCKADDR,    /* SOCKADDR is not NULL (sendto on a connected socket is not) */
	/* With read-only mounts (sandbox.readOnlyMounts) the kernel refuses these on every file the
	 * command opened itself, and the files the broker opened for it were backed up when they
	 * were opened: */
	SYSCALL_NOTIFY_UNLESS_RO,      /* fchmod & co.: not notified (fchmod to set-ID bits is) */
	SYSCALL_NOTIFY_PATH_UNLESS_RO, /* utimensat: notified only with a path (NULL: the fd) */
	/* ... and a read-only mount would answer EROFS to access(W_OK): the broker answers it as
	 * the file's own mount would. Not notified without read-only mounts. */
	SYSCALL_NOTIFY_RO_WRITE_ACCESS, /* ACCESS_MODE has W_OK */
	/* With copy-on-write (sandbox.copyOnWrite) the overlay skips every sync of its upper layer
	 * (it is volatile); the supervisor notes that the command asked for one, and the merge
	 * flushes the workspace's file system at its end. Not notified in the other modes. */
	SYSCALL_NOTIFY_COW_SYNC, /* always; with SYNC_FLAGS when they have a bit of sync_flags */
};

/* Not broker operations: chroot("/") and access() are answered by the supervisor itself; a
 * sync is noted by it (copy-on-write) and runs in the kernel. */
#define SYSCALL_OP_CHROOT _BROKER_OP_MAX
#define SYSCALL_OP_ACCESS (_BROKER_OP_MAX + 1)
#define SYSCALL_OP_SYNC	  (_BROKER_OP_MAX + 2)

/* The open flag that makes writes synchronous: O_SYNC is O_DSYNC and a bit of its own. */
#define SYSCALL_OPEN_SYNC_FLAG O_DSYNC

/* Open flags that write, create or truncate (O_TMPFILE: the bit of its own, not O_DIRECTORY). */
#define SYSCALL_OPEN_WRITE_FLAGS (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | 020000000)

struct syscall_row {
	const char *name;
	int nr_x86_64, nr_aarch64; /* -1: the architecture has no such syscall */
	enum broker_op op;	   /* or SYSCALL_OP_CHROOT, SYSCALL_OP_ACCESS, SYSCALL_OP_SYNC */
	enum syscall_notify notify;
	enum syscall_arg args[6];
	uint64_t valid_flags; /* FLAGS may hold only these: EINVAL otherwise */
	uint64_t fixed_flags; /* flags the call implies (creat, rmdir, lchown, l*xattr) */
	uint64_t sync_flags;  /* SYNC_FLAGS: the bits that ask for a sync (RWF_DSYNC, MS_SYNC) */
};

extern const struct syscall_row syscall_table[];
extern const size_t syscall_table_size;

/* The row's number on the architecture this is built for, -1 if it has no such syscall. */
static inline int syscall_row_nr(const struct syscall_row *row)
{
#if defined(__x86_64__)
	return row->nr_x86_64;
#elif defined(__aarch64__)
	return row->nr_aarch64;
#else
#error "brokered supports x86_64 and aarch64 only"
#endif
}

/* With copy-on-write, a notification of row is a request for a sync, nothing else: the filter
 * notifies the file calls only when they sync (sandbox.c), and the rows of the syncs. */
static inline bool syscall_row_cow_sync(const struct syscall_row *row)
{
	return row->op < BROKER_OP_CONNECT || row->op == SYSCALL_OP_SYNC;
}

/* The position (0..5) of the argument that is `what` in row, -1 if none is. */
int syscall_row_arg(const struct syscall_row *row, enum syscall_arg what);
/* The row of a native syscall number, NULL if the table has none. */
const struct syscall_row *syscall_table_find(int nr);

/* Where the decoder puts its copies of the target's memory; one per supervisor. */
struct syscall_buffers;
int syscall_buffers_new(struct syscall_buffers **ret);
void syscall_buffers_free(struct syscall_buffers *b);

enum {
	SYSCALL_DECODE_CONTINUE =
	    1,			   /* let the kernel run it unchanged (a read-only openat2, ...) */
	SYSCALL_DECODE_CHROOT = 2, /* chroot: q->path is set, the supervisor decides */
	SYSCALL_DECODE_ACCESS = 3, /* access: q->path or q->dirfd, q->mode, q->flags */
};
/*
 * Decode a notification of thread tid into a broker request whose pointers point into b.
 * Returns 0, SYSCALL_DECODE_*, or a -errno for the target (the kernel's, for invalid arguments).
 * The caller must check that the notification is still valid before acting on the copies.
 */
int syscall_decode(struct syscall_buffers *b, const struct seccomp_data *data, pid_t tid,
		   struct broker_req *q);
