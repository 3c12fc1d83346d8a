/* SPDX-License-Identifier: MIT */
/*
 * Resolving a path as the target would, but into fds the broker acts on (DESIGN section 4): the
 * parent directory is an O_PATH fd, its real path is read back from the fd for the policy check,
 * and the operation then uses *at() on that fd and the final name, so a symlink swapped in between
 * cannot redirect it. Never logs.
 */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "proc.h"

enum resolve_flags {
	RESOLVE_FOLLOW = 1 << 0, /* follow a symlink in the final component (open, chmod, ...) */
	RESOLVE_ALLOW_DOTDOT = 1 << 2, /* final "." / "..": resolve to the directory itself */
};

struct resolved {
	int parent_fd;	   /* O_PATH fd of the parent directory, or -1 for a magic-link object */
	dev_t parent_dev;  /* its st_dev (0 for a magic-link object) */
	char *name;	   /* final component (no '/'), NULL for a magic-link object */
	char *parent_real; /* real absolute path of the parent */
	char *real;	   /* real absolute path of the final (parent_real/name) */
	bool exists;	   /* the final exists (lstat semantics) */
	struct stat st;	   /* its lstat() when exists */
	int obj_fd;	   /* magic link (/proc/PID/fd/N, ...) resolved: O_PATH fd of the object */
	bool trailing_slash; /* the path as written ended in '/' */
};

#define RESOLVED_INIT                                                                              \
	{                                                                                          \
		.parent_fd = -1, .obj_fd = -1                                                      \
	}

struct resolve_ctx {
	pid_t tid;   /* the target thread */
	int root_fd; /* O_PATH "/" of the broker (the target cannot chroot) */
	/* The notification the target is stopped in (NULL: the socket door, no target): a
	 * resolution that went through /proc/TID is valid only if this still is once it is done. */
	const struct notif_ref *notif;
	/* The target sees read-only copies of our mounts (sandbox.readOnlyMounts): what is taken
	 * from it (its cwd, a dirfd, a magic link's object) is reopened on ours by its path. */
	bool foreign_mounts;
};

/*
 * Resolve path (relative to the target's dirfd, AT_FDCWD for its cwd) through its parent. With
 * RESOLVE_FOLLOW, a symlink in the final component is followed (at most 40 hops, else -ELOOP),
 * and a dangling one resolves to the missing target so that O_CREAT creates it, as the kernel does.
 * Paths under /proc/self, /proc/thread-self and /dev/fd, /dev/std{in,out,err} mean the target's.
 */
int resolve_path(const struct resolve_ctx *ctx, int dirfd, const char *path, unsigned flags,
		 struct resolved *ret);
/* Resolve an fd of the target (fchmod, fchown, futimens, fsetxattr): obj_fd + real path. */
int resolve_target_fd(const struct resolve_ctx *ctx, int fd, struct resolved *ret);
/* Real path of one of our fds, "(deleted)" detected through st_nlink. */
int resolve_fd_real_path(int fd, char **ret);
void resolved_done(struct resolved *r);
