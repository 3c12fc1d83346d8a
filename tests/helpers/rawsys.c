/* SPDX-License-Identifier: MIT */
/*
 * rawsys: one raw file-changing system call per invocation, for the end-to-end tests of
 * `brokered run` (t0230). Prints "ok" (and a result where there is one) on stdout and exits 0, or
 * prints "rawsys: OP: ENAME (message)" on stderr and exits 1.
 *
 *   rawsys openat2 PATH            openat2(O_WRONLY|O_CREAT|O_TRUNC), write "openat2\n"
 *   rawsys exchange A B            renameat2(RENAME_EXCHANGE)
 *   rawsys noreplace A B           renameat2(RENAME_NOREPLACE)
 *   rawsys tmpfile DIR NAME        open(DIR, O_TMPFILE|O_WRONLY), write "tmpfile\n", linkat to NAME
 *   rawsys chmod PATH MODE         fchmodat(AT_FDCWD)
 *   rawsys fchmod PATH MODE        open O_RDONLY, fchmod on the fd
 *   rawsys fchown PATH             open O_RDONLY, fchown(fd, own uid, own gid)
 *   rawsys futimens PATH SEC       open O_RDONLY, futimens(fd, {SEC, SEC})
 *   rawsys setxattr PATH NAME VAL  setxattr
 *   rawsys fsetxattr PATH NAME VAL open O_RDONLY, fsetxattr
 *   rawsys getxattr PATH NAME      print the value
 *   rawsys removexattr PATH NAME   removexattr
 *   rawsys mkfifo PATH             mknodat(S_IFIFO|0644)
 *   rawsys fifo PATH               mkfifo PATH, a child writes "through-fifo\n", the parent reads
 * it rawsys pwrite PATH OFF TEXT    open O_WRONLY (no O_TRUNC), pwrite TEXT at OFF
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int fail(const char *op)
{
	int e = errno;
	const char *n = strerrorname_np(e);
	fprintf(stderr, "rawsys: %s: %s (%s)\n", op, n ? n : "?", strerror(e));
	return 1;
}

static int done(void)
{
	puts("ok");
	return 0;
}

static int write_all(int fd, const char *s)
{
	size_t n = strlen(s);
	return write(fd, s, n) == (ssize_t)n ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: rawsys OP ARGS...\n");
		return 2;
	}
	const char *op = argv[1], *p = argv[2];
	int fd;

	if (!strcmp(op, "openat2")) {
		struct open_how how = {.flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
				       .mode = 0644};
		fd = (int)syscall(SYS_openat2, AT_FDCWD, p, &how, sizeof how);
		if (fd < 0)
			return fail(op);
		if (write_all(fd, "openat2\n") < 0)
			return fail("write");
		close(fd);
		return done();
	}
	if ((!strcmp(op, "exchange") || !strcmp(op, "noreplace")) && argc == 4) {
		unsigned fl = !strcmp(op, "exchange") ? RENAME_EXCHANGE : RENAME_NOREPLACE;
		if (syscall(SYS_renameat2, AT_FDCWD, p, AT_FDCWD, argv[3], fl) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "tmpfile") && argc == 4) {
		fd = open(p, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0640);
		if (fd < 0)
			return fail("open O_TMPFILE");
		if (write_all(fd, "tmpfile\n") < 0)
			return fail("write");
		char proc[64];
		snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
		if (linkat(AT_FDCWD, proc, AT_FDCWD, argv[3], AT_SYMLINK_FOLLOW) < 0)
			return fail("linkat");
		close(fd);
		return done();
	}
	if (!strcmp(op, "chmod") && argc == 4) {
		if (fchmodat(AT_FDCWD, p, (mode_t)strtoul(argv[3], NULL, 8), 0) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "fchmod") && argc == 4) {
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			return fail("open");
		if (fchmod(fd, (mode_t)strtoul(argv[3], NULL, 8)) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "fchown")) {
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			return fail("open");
		if (fchown(fd, getuid(), getgid()) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "futimens") && argc == 4) {
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			return fail("open");
		time_t t = (time_t)strtoll(argv[3], NULL, 10);
		struct timespec ts[2] = {{.tv_sec = t}, {.tv_sec = t}};
		if (futimens(fd, ts) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "setxattr") && argc == 5) {
		if (setxattr(p, argv[3], argv[4], strlen(argv[4]), 0) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "fsetxattr") && argc == 5) {
		if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
			return fail("open");
		if (fsetxattr(fd, argv[3], argv[4], strlen(argv[4]), 0) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "getxattr") && argc == 4) {
		char v[256];
		ssize_t n = getxattr(p, argv[3], v, sizeof v - 1);
		if (n < 0)
			return fail(op);
		v[n] = 0;
		printf("%s\n", v);
		return 0;
	}
	if (!strcmp(op, "removexattr") && argc == 4) {
		if (removexattr(p, argv[3]) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "mkfifo")) {
		if (mknodat(AT_FDCWD, p, S_IFIFO | 0644, 0) < 0)
			return fail(op);
		return done();
	}
	if (!strcmp(op, "fifo")) {
		if (mknodat(AT_FDCWD, p, S_IFIFO | 0644, 0) < 0)
			return fail("mknod");
		pid_t pid = fork();
		if (pid < 0)
			return fail("fork");
		if (pid == 0) {
			int w = open(p, O_WRONLY | O_CLOEXEC);
			if (w < 0)
				_exit(fail("open for write"));
			_exit(write_all(w, "through-fifo\n") < 0 ? fail("write") : 0);
		}
		int r = open(p, O_RDONLY | O_CLOEXEC);
		if (r < 0)
			return fail("open for read");
		char buf[64];
		ssize_t n = read(r, buf, sizeof buf - 1);
		if (n < 0)
			return fail("read");
		buf[n] = 0;
		int st;
		waitpid(pid, &st, 0);
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			return 1;
		fputs(buf, stdout);
		return 0;
	}
	if (!strcmp(op, "pwrite") && argc == 5) {
		if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
			return fail("open");
		if (pwrite(fd, argv[4], strlen(argv[4]), strtoll(argv[3], NULL, 10)) < 0)
			return fail(op);
		return done();
	}
	fprintf(stderr, "rawsys: unknown operation %s\n", op);
	return 2;
}
