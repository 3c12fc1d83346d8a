/* SPDX-License-Identifier: MIT */
/*
 * resolve_path() and resolve_target_fd() (src/resolve.c) against this test's own thread as the
 * "target", the way systemd tests chase(): a tree in a temp dir with symlinks, loops, dots and
 * magic links, and what each path must resolve to (parent, name, real path, existence).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "proc.h"
#include "resolve.h"
#include "tap.h"

static char top[PATH_MAX]; /* real path of the temp dir */
static struct resolve_ctx ctx;

static char *at(const char *rel)
{
	static char buf[4][2 * PATH_MAX + 2];
	static int i;
	char *b = buf[i++ % 4];
	snprintf(b, sizeof buf[0], "%s%s%s", top, *rel ? "/" : "", rel);
	return b;
}

/* Resolve path (relative to dirfd) and compare the real path and existence; returns the error. */
static int check(int dirfd, const char *path, unsigned flags, const char *want_rel,
		 bool want_exists, const char *what)
{
	struct resolved r = RESOLVED_INIT;
	int k = resolve_path(&ctx, dirfd, path, flags, &r);
	if (k < 0) {
		ok(0, "%s: resolved (got %s)", what, strerror(-k));
		resolved_done(&r);
		return k;
	}
	is_str(r.real, at(want_rel), "%s: real path", what);
	ok(r.exists == want_exists, "%s: %s", what, want_exists ? "exists" : "does not exist");
	resolved_done(&r);
	return 0;
}

static void setup(void)
{
	char tmpl[] = "/tmp/brokered-resolve.XXXXXX";
	if (!mkdtemp(tmpl) || !realpath(tmpl, top))
		abort();
	const char *dirs[] = {"a", "a/b", "c"};
	for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
		if (mkdir(at(dirs[i]), 0755) < 0)
			abort();
	int fd = open(at("a/b/file"), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	if (fd < 0)
		abort();
	close(fd);
	if (symlink("b/file", at("a/rel")) < 0 || symlink(at("a/b"), at("abs")) < 0 ||
	    symlink("../c/new", at("a/dangling")) < 0 || symlink("loop2", at("loop1")) < 0 ||
	    symlink("loop1", at("loop2")) < 0 || symlink("..", at("a/up")) < 0)
		abort();
	if (chdir(at("a")) < 0)
		abort();
	ctx = (struct resolve_ctx){gettid(), open("/", O_PATH | O_CLOEXEC), NULL, false};
}

static void plain(void)
{
	check(AT_FDCWD, "b/file", 0, "a/b/file", true, "relative to the cwd");
	check(AT_FDCWD, at("a/b/file"), 0, "a/b/file", true, "absolute");
	check(AT_FDCWD, "b//./file", 0, "a/b/file", true, "'//' and '.' collapse");
	check(AT_FDCWD, "b/../b/file", 0, "a/b/file", true, "'..' goes up");
	check(AT_FDCWD, "b/missing", 0, "a/b/missing", false, "a missing final");
	int dfd = open(at("c"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	check(dfd, "x", 0, "c/x", false, "relative to a dirfd of the target");
	close(dfd);

	struct resolved r = RESOLVED_INIT;
	is_int(resolve_path(&ctx, AT_FDCWD, "b/missing/x", 0, &r), -ENOENT,
	       "missing parent: ENOENT");
	resolved_done(&r);
	is_int(resolve_path(&ctx, AT_FDCWD, "b/file/x", 0, &r), -ENOTDIR,
	       "a file as parent: ENOTDIR");
	resolved_done(&r);
	is_int(resolve_path(&ctx, AT_FDCWD, "b/file/", 0, &r), -ENOTDIR,
	       "trailing slash on a file: ENOTDIR");
	resolved_done(&r);
	is_int(resolve_path(&ctx, AT_FDCWD, "", 0, &r), -ENOENT, "empty path: ENOENT");
	resolved_done(&r);
	is_int(resolve_path(&ctx, 12345, "x", 0, &r), -EBADF,
	       "a dirfd the target does not have: EBADF");
	resolved_done(&r);
	char *lng = malloc(PATH_MAX + 2);
	memset(lng, 'x', PATH_MAX + 1);
	lng[PATH_MAX + 1] = '\0';
	is_int(resolve_path(&ctx, AT_FDCWD, lng, 0, &r), -ENAMETOOLONG, "a path over PATH_MAX");
	resolved_done(&r);
	free(lng);
}

static void symlinks(void)
{
	/* The final component is followed only when asked; the parent chain always. */
	check(AT_FDCWD, "rel", 0, "a/rel", true, "final symlink, not followed");
	check(AT_FDCWD, "rel", RESOLVE_FOLLOW, "a/b/file", true, "final symlink, followed");
	check(AT_FDCWD, at("abs/file"), 0, "a/b/file", true,
	      "absolute symlink in the parent chain");
	check(AT_FDCWD, "dangling", RESOLVE_FOLLOW, "c/new", false,
	      "dangling symlink followed to its missing target (O_CREAT creates it)");
	check(AT_FDCWD, "up/x", 0, "x", false, "symlink to '..' in the parent chain");

	struct resolved r = RESOLVED_INIT;
	is_int(resolve_path(&ctx, AT_FDCWD, at("loop1"), RESOLVE_FOLLOW, &r), -ELOOP,
	       "symlink loop, followed: ELOOP");
	resolved_done(&r);
	is_int(resolve_path(&ctx, AT_FDCWD, at("loop1/x"), 0, &r), -ELOOP,
	       "symlink loop in the parent chain: ELOOP");
	resolved_done(&r);
	check(AT_FDCWD, at("loop1"), 0, "loop1", true, "symlink loop as the final, not followed");
}

static void magic(void)
{
	/* /proc/self, /dev/fd/N and relative paths mean the target's, not the broker's: a child
	 * with its own cwd and fd 7 is the target (the broker's own /proc/PID is never followed).
	 */
	int pipefd[2];
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		abort();
	pid_t child = fork();
	if (child == 0) {
		int fd = open(at("a/b/file"), O_RDONLY);
		if (fd < 0 || dup2(fd, 7) < 0 || chdir(at("c")) < 0)
			_exit(1);
		(void)!write(pipefd[1], "r", 1);
		pause();
		_exit(0);
	}
	char c;
	if (child < 0 || read(pipefd[0], &c, 1) != 1)
		abort();
	struct resolve_ctx tc = ctx;
	tc.tid = child;
	struct resolved r = RESOLVED_INIT;
	ok(resolve_path(&tc, AT_FDCWD, "/proc/self/fd/7", RESOLVE_FOLLOW, &r) == 0 && r.obj_fd >= 0,
	   "/proc/self/fd/N followed: the target's fd, as an object");
	is_str(r.real, at("a/b/file"), "  its real path");
	resolved_done(&r);
	ok(resolve_path(&tc, AT_FDCWD, "/dev/fd/7", RESOLVE_FOLLOW, &r) == 0 && r.obj_fd >= 0,
	   "/dev/fd/N followed");
	is_str(r.real, at("a/b/file"), "  its real path");
	resolved_done(&r);
	ok(resolve_target_fd(&tc, 7, &r) == 0 && r.exists,
	   "resolve_target_fd of the target's fd 7");
	is_str(r.real, at("a/b/file"), "  its real path");
	resolved_done(&r);
	is_int(resolve_target_fd(&tc, 99, &r), -EBADF, "an fd the target does not have: EBADF");
	resolved_done(&r);
	struct resolve_ctx keep = ctx;
	ctx = tc;
	check(AT_FDCWD, "x", 0, "c/x", false, "a relative path: the target's cwd");
	check(AT_FDCWD, "/proc/self/cwd/y", 0, "c/y", false, "/proc/self/cwd/...");
	check(AT_FDCWD, "/proc/thread-self/cwd/y", 0, "c/y", false, "/proc/thread-self/cwd/...");
	ctx = keep;
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	close(pipefd[0]);
	close(pipefd[1]);
}

static void stale_target(void)
{
	/* A notification that is no longer pending: whatever /proc/TID gave is not trusted. Any fd
	 * that is not a seccomp listener answers the validity ioctl with an error, like a stale id.
	 */
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	const struct notif_ref stale = {devnull, 1};
	struct resolve_ctx c = ctx;
	c.notif = &stale;
	struct resolved r = RESOLVED_INIT;
	is_int(resolve_path(&c, AT_FDCWD, "b/file", 0, &r), -ESRCH,
	       "stale notification: relative path refused (ESRCH)");
	resolved_done(&r);
	is_int(resolve_target_fd(&c, devnull, &r), -ESRCH, "stale notification: target fd refused");
	resolved_done(&r);
	mode_t um;
	/* a tid that was never looked up: a fresh open of /proc/TID/status, then the check */
	is_int(proc_get_umask(getpid(), &stale, &um), -ESRCH, "stale notification: umask refused");
	ok(proc_get_umask(gettid(), NULL, &um) == 0, "umask of the test itself");
	close(devnull);
}

int main(void)
{
	setup();
	plain();
	symlinks();
	magic();
	stale_target();
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", top);
	if (chdir("/") == 0 && system(cmd) != 0)
		printf("# could not remove %s\n", top);
	return tap_done();
}
