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
 * Copy the NUL-terminated string at addr into buf (size bufsz, including the NUL). Reads page by page
 * so a string at the end of a mapping works. -ENAMETOOLONG if no NUL within bufsz, -EFAULT if
 * unreadable.
 */
int proc_read_string(pid_t tid, uint64_t addr, char *buf, size_t bufsz, size_t *ret_len);
/* O_PATH fd of the target's cwd (dirfd == AT_FDCWD) or of its fd number dirfd. */
int proc_open_dirfd(pid_t tid, int dirfd, int flags);
/* The target's current umask (from /proc/TID/status). */
int proc_get_umask(pid_t tid, mode_t *ret);
/* Thread group id of tid. */
int proc_get_tgid(pid_t tid, pid_t *ret);
/* The target's effective capability set (bit n: capability n). */
int proc_get_cap_eff(pid_t tid, uint64_t *ret);
