/* SPDX-License-Identifier: MIT */
/*
 * Access to a target (a sandboxed thread stopped in a notified syscall): its memory, its fds, cwd
 * and umask. Every read is a copy; callers must check the notification is still valid
 * (SECCOMP_IOCTL_NOTIF_ID_VALID) after reading and before acting on the copies.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Copy n bytes at addr of tid. -EFAULT if any byte is unreadable. */
int proc_read_mem(pid_t tid, uint64_t addr, void *buf, size_t n);
/*
 * Copy the NUL-terminated string at addr into buf (size bufsz, including the NUL). Reads page by
 * page so a string at the end of a mapping works. -ENAMETOOLONG if no NUL within bufsz, -EFAULT if
 * unreadable.
 */
int proc_read_string(pid_t tid, uint64_t addr, char *buf, size_t bufsz, size_t *ret_len);
/*
 * The notification a target is stopped in. A thread id is only a name: once the target is gone
 * (killed, its syscall interrupted) the id can be reused by another process, so whatever was
 * opened under /proc/TID is trusted only if the notification is still valid *after* the open
 * (the order of the kernel's samples/seccomp/user-trap.c). NULL where there is no target
 * (the socket door acts for itself).
 */
struct notif_ref {
	int fd; /* the listener */
	uint64_t id;
};
/* 0 if the notification is still pending (the target is the thread that asked), else -ESRCH. */
int proc_target_still_valid(const struct notif_ref *n);
/* O_PATH fd of the target's cwd (dirfd == AT_FDCWD) or of its fd number dirfd. */
int proc_open_dirfd(pid_t tid, int dirfd, int flags);
/* The target's current umask (from /proc/TID/status); -ESRCH if n is no longer valid. */
int proc_get_umask(pid_t tid, const struct notif_ref *n, mode_t *ret);
/* Thread group id of tid. */
int proc_get_tgid(pid_t tid, const struct notif_ref *n, pid_t *ret);
/* The target's effective capability set (bit n: capability n). */
int proc_get_cap_eff(pid_t tid, const struct notif_ref *n, uint64_t *ret);

#define PROC_GROUPS_MAX 64
/* The target's credentials: real, effective, saved and file-system ids, supplementary groups. */
struct proc_ids {
	uid_t uid[4];
	gid_t gid[4];
	gid_t groups[PROC_GROUPS_MAX];
	size_t n_groups;
};
/* -E2BIG: more than PROC_GROUPS_MAX groups. */
int proc_get_ids(pid_t tid, const struct notif_ref *n, struct proc_ids *ret);
