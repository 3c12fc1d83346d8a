/* SPDX-License-Identifier: MIT */
/*
 * Constants that Debian 12's kernel headers (linux-libc-dev 6.1) and libseccomp 2.5.4 lack but the
 * kernels we run on have. Each is guarded so newer headers win.
 */
#pragma once

#include <fcntl.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>

/* Landlock, ABI 3..6 */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP	(1ULL << 0)
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LANDLOCK_SCOPE_SIGNAL		    (1ULL << 1)
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

/* The ruleset attribute grew with the ABI; this is the ABI 6 layout (handled_access_net: 4, scoped:
 * 6). */
struct brokered_landlock_ruleset_attr {
	__u64 handled_access_fs;
	__u64 handled_access_net;
	__u64 scoped;
};

/* seccomp */
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

/* openat2 */
#ifndef RESOLVE_NO_XDEV
#define RESOLVE_NO_XDEV	      0x01
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS   0x04
#define RESOLVE_BENEATH	      0x08
#define RESOLVE_IN_ROOT	      0x10
#define RESOLVE_CACHED	      0x20
#endif

/*
 * Syscall numbers newer than the 6.1 headers. Since 5.1 (424, pidfd_send_signal) every new
 * syscall has the same number on every architecture, so one list serves x86_64 and aarch64.
 * The notified syscalls carry their number per architecture in src/syscall-table.c (aarch64 never
 * had the legacy path calls: open, rename, mkdir, ...); the filter's other rules name syscalls
 * both architectures have.
 */
#if !defined(__x86_64__) && !defined(__aarch64__)
#error "brokered supports x86_64 and aarch64 only"
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_getxattrat
#define __NR_getxattrat 464
#endif
#ifndef __NR_listxattrat
#define __NR_listxattrat 465
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif
#ifndef __NR_open_tree_attr
#define __NR_open_tree_attr 467
#endif
#ifndef __NR_file_getattr
#define __NR_file_getattr 468
#endif
#ifndef __NR_file_setattr
#define __NR_file_setattr 469
#endif
/* Highest syscall number this build knows; anything above is refused with ENOSYS (fail closed). */
#define BROKERED_NR_KNOWN_MAX	 469
#define BROKERED_NR_FUTURE_LIMIT 512

#ifndef AT_RENAME_NOREPLACE
#define AT_RENAME_NOREPLACE 0x0001
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#define RENAME_EXCHANGE	 (1 << 1)
#define RENAME_WHITEOUT	 (1 << 2)
#endif

/* ioctls that change inode flags; Landlock does not cover them on regular files. */
#ifndef FS_IOC_SETFLAGS
#define FS_IOC_SETFLAGS _IOW('f', 2, long)
#endif
#ifndef FS_IOC_FSSETXATTR
#define FS_IOC_FSSETXATTR _IOW('X', 32, struct fsxattr)
#endif
