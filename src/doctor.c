/* SPDX-License-Identifier: MIT */
/* `brokered doctor`: what this kernel supports, and what would degrade without it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "cli.h"
#include "sandbox.h"

static void line(bool ok, const char *what, const char *detail, const char *if_missing)
{
	printf("  [%s] %s", ok ? " ok " : "MISS", what);
	if (detail && *detail)
		printf(" (%s)", detail);
	printf("\n");
	if (!ok && if_missing)
		printf("         without it: %s\n", if_missing);
}

/* Can a run make its read-only mount namespace here (with overlay: and its copy-on-write
 * overlay)? Tried in a child that then exits: as root directly, else in a user namespace. */
static bool probe_mount_ns(bool overlay)
{
	const char *pretend = getenv("BROKERED_PRETEND_MISSING");
	if (pretend && strstr(pretend, "mountns"))
		return false;
	return sandbox_probe_mount_ns(!sandbox_can_make_mount_ns(), overlay);
}

int cli_doctor(int argc, char **argv)
{
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		puts("Usage: brokered doctor\n\nPrint the kernel features brokered uses and what "
		     "would degrade without them.\nExit status 0 when everything brokered needs is "
		     "there, 1 otherwise.");
		return 0;
	}
	struct utsname u;
	uname(&u);
	struct sandbox_features f;
	sandbox_probe(&f);
	printf("brokered doctor: %s %s %s, running as uid %d\n", u.sysname, u.release, u.machine,
	       (int)getuid());
	char abi[64];
	snprintf(abi, sizeof abi, "ABI %d", f.landlock_abi);
	printf("Required:\n");
	line(f.landlock_abi >= 1, "Landlock", f.landlock_abi ? abi : "not enabled",
	     "nothing stops a sandboxed process from writing; brokered refuses to run");
	line(f.seccomp_notify, "seccomp user notification", NULL,
	     "file changes cannot be brokered or backed up; brokered refuses to run");
	line(f.seccomp_addfd_send, "seccomp ADDFD with FLAG_SEND (5.14)", NULL,
	     "files opened by the broker cannot be handed to the command atomically");
	line(f.pidfd_getfd, "pidfd_getfd (5.6)", NULL,
	     "sockets cannot be taken from the command to decide on them; brokered refuses to run");
	printf("Used when present:\n");
	line(f.landlock_abi >= 2, "Landlock REFER (ABI 2)", NULL,
	     "renames and links in the scratch dir across directories are refused");
	line(f.landlock_abi >= 6, "Landlock signal and abstract-socket scoping (ABI 6)", NULL,
	     "sandboxed processes can signal processes outside and reach abstract sockets");
	line(f.wait_killable, "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (5.19)", NULL,
	     "a signal during a brokered syscall may make the kernel retry an operation already "
	     "done");
	line(f.kcmp, "kcmp (CONFIG_CHECKPOINT_RESTORE)", NULL,
	     "fd-form metadata calls on files the broker just created (tar's futimens, fchown, "
	     "fchmod) are resolved through /proc, which is slower");
	line(f.openat2, "openat2 with RESOLVE_NO_MAGICLINKS (5.6)", NULL,
	     "paths cannot be resolved safely; brokered refuses to run");
	line(
	    f.landlock_abi >= 4, "Landlock TCP bind/connect rules (ABI 4)", NULL,
	    "in network modes deny and proxy only the broker refuses TCP (the kernel does not back "
	    "it up)");
	const char *how = sandbox_can_make_mount_ns() ? "root" : "in a user namespace";
	bool ro = probe_mount_ns(false);
	line(ro, "read-only mount namespace (sandbox.readOnlyMounts)",
	     ro ? how : "needs root or unprivileged user namespaces",
	     "fchmod, fchown, futimens and the xattr calls on a file descriptor are each one "
	     "notification to the broker (write-heavy work is slower), and the kernel leaves "
	     "metadata changes to the broker alone");
	const char *pretend = getenv("BROKERED_PRETEND_MISSING");
	bool overlay = probe_mount_ns(true) && !(pretend && strstr(pretend, "overlay"));
	line(overlay, "copy-on-write overlay of the workspace (sandbox.copyOnWrite)",
	     overlay ? how : "needs root, or user namespaces and an overlay there",
	     "every change in the workspace is one or more notifications to the broker while the "
	     "command runs (write-heavy work is slower)");
	printf("Network (sandbox.network): Unix sockets by path are decided by the broker on the "
	       "socket\n"
	       "  itself (pidfd_getfd); modes deny and proxy: TCP %s, UDP and the rest by the "
	       "broker.\n",
	       f.landlock_abi >= 4 ? "refused by Landlock and the broker"
				   : "refused by the broker");
	bool ok = f.landlock_abi >= 1 && f.seccomp_notify && f.seccomp_addfd_send && f.openat2 &&
		  f.pidfd_getfd;
	printf("%s\n", ok ? "brokered can run here with full protection."
			  : "brokered cannot run here with full protection (see MISS above).");
	return ok ? 0 : 1;
}
