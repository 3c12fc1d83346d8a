/* SPDX-License-Identifier: MIT */
/*
 * The sandboxed child's confinement: no_new_privs, a Landlock ruleset that denies writes everywhere
 * but a per-run scratch dir and the device nodes a shell needs, and a seccomp filter that sends
 * every file-changing syscall to the supervisor (DESIGN sections 1 and 3). Building the filter
 * happens in the parent (it allocates); applying it in the child uses only raw syscalls.
 */
#pragma once

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sandbox_features {
	int landlock_abi;	 /* 0: none */
	bool landlock_errata_ok; /* reserved for future errata checks */
	bool seccomp_notify;	 /* SECCOMP_RET_USER_NOTIF usable */
	bool seccomp_addfd_send; /* SECCOMP_ADDFD_FLAG_SEND (5.14) */
	bool wait_killable;	 /* SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19) */
	bool pidfd_getfd;	 /* 5.6 */
	bool kcmp;		 /* CONFIG_CHECKPOINT_RESTORE */
	bool openat2;		 /* 5.6 */
};

/* Probe the running kernel (cheap, no side effects on this process). */
void sandbox_probe(struct sandbox_features *f);

struct sandbox_landlock {
	int ruleset_fd;
	bool read_deny; /* READ_FILE handled: the denied subtrees are not readable */
	int abi;
	uint64_t handled_fs;
	uint64_t
	    handled_net; /* TCP bind/connect refused to the sandbox itself (network deny/proxy) */
	uint64_t scoped;
};

/*
 * Create the Landlock ruleset in the parent: writable scratch_dir, the device nodes, and nothing
 * else writable. A missing device node is skipped; a missing scratch dir is an error.
 */
/* Device nodes a shell and common tools write to, which Landlock lets the sandbox write by itself
 * (the broker lets those calls continue); a directory (/dev/pts) covers what is below it. */
extern const char *const sandbox_writable_devices[];
extern const size_t sandbox_n_writable_devices;
int sandbox_landlock_prepare(const char *scratch_dir, const char *const *read_denied,
			     size_t n_read_denied, bool deny_tcp, struct sandbox_landlock *ret,
			     char **ret_failed_path);
/* Rules the read allow-list needed (for the doctor and benchmarks). */
/* In the child: restrict self. */
int sandbox_landlock_apply(const struct sandbox_landlock *ll);

/* What the command's mounts are, which decides what the filter must notify. */
enum sandbox_mounts {
	SANDBOX_MOUNTS_SHARED,	      /* ours: every change is notified */
	SANDBOX_MOUNTS_READ_ONLY,     /* sandbox.readOnlyMounts */
	SANDBOX_MOUNTS_COPY_ON_WRITE, /* sandbox.copyOnWrite: no file operation is notified */
};

/* The BPF program (malloc'd filter array in prog->filter). restrict_ip: network mode deny or
 * proxy (raw IP sockets and non-IP network families refused at socket()). */
int sandbox_build_filter(struct sock_fprog *prog, bool restrict_ip, enum sandbox_mounts mounts);
/* The rules that program is compiled from (filter.h), for the tests; filter_done() them. */
struct filter;
int sandbox_filter_rules(struct filter *f, bool restrict_ip, enum sandbox_mounts mounts);
/* In the child: no_new_privs + load the filter with a new listener; returns the listener fd. */
int sandbox_install_filter(const struct sock_fprog *prog, bool wait_killable);
/* In the child: drop capabilities a root-run command could use to get around the broker. */
int sandbox_drop_dangerous_caps(void);

/*
 * Read-only mounts (sandbox.readOnlyMounts). With ro_mounts, sandbox_build_filter() leaves
 * fchmod, fchown, futimens, fsetxattr and fremovexattr to the kernel, and notifies access() for
 * writing instead. The command must then run in a private mount namespace where every mount is
 * read-only but its scratch dir: the files the broker opens for it come from the broker's own
 * (writable) mounts, so those calls work on them, and the kernel refuses them with EROFS on every
 * file the command opened itself, which the broker never saw. Making the namespace takes
 * CAP_SYS_ADMIN (root, outside a container that took it away) or, without it, a user namespace
 * of the command's own first (sandbox_enter_user_ns()).
 */
bool sandbox_can_make_mount_ns(void);
/* In a child that exits: can we make a mount namespace here (with user_ns: in a user namespace
 * of our own first; with overlay: and an overlay with our options, userxattr in a user
 * namespace)? Unprivileged user namespaces may be off (user.max_user_namespaces, a container's
 * seccomp profile, an LSM). */
bool sandbox_probe_mount_ns(bool user_ns, bool overlay);
/*
 * In the child, before its mounts, where it lacks CAP_SYS_ADMIN: a user namespace in which its
 * own uid and gid map to themselves (and nothing else: other users' files show as the overflow
 * ids, supplementary groups as nogroup, setgroups(2) is denied). The child then has every
 * capability in it, for its mounts: sandbox_drop_all_caps() after them.
 */
int sandbox_enter_user_ns(void);
int sandbox_drop_all_caps(void);
/* In the child, before its capabilities are dropped. */
int sandbox_read_only_mounts(const char *scratch_dir);

/*
 * Copy-on-write (sandbox.copyOnWrite): the read-only mounts above, and the workspace an overlay
 * whose lower layer is the workspace itself and whose upper layer (upper, work: empty directories
 * on the workspace's file system) takes every change; /dev/shm a private tmpfs. The broker merges
 * the upper layer into the workspace when the command has ended (broker_merge()), deciding and
 * backing up each change there. In the child, before its capabilities are dropped; it changes
 * into its working directory again (the overlay's, where it is below the workspace).
 */
int sandbox_copy_on_write_mounts(const char *scratch_dir, const char *workspace, const char *upper,
				 const char *work, bool user_ns);
/* Does the command get a /dev/shm of its own (not where the workspace or scratch dir is)? */
bool sandbox_cow_private_shm(const char *scratch_dir, const char *workspace);
/* Is an overlay with our options to be had here (redirect_dir on, metacopy and index off; with
 * userxattr, as made in a user namespace: userxattr instead of redirect_dir)? */
bool sandbox_has_overlay(bool userxattr);
/* In the child, after the mounts: Landlock lets the command write below path (a directory). */
int sandbox_landlock_allow_writes(const struct sandbox_landlock *ll, const char *path);
