/* SPDX-License-Identifier: MIT */
/*
 * escape-sys: one file-changing system call, made with the raw syscall where libc might do
 * something else, for the end-to-end escape tests (tests/e2e/t04*-escape-*.sh).
 *
 *   escape-sys OP ARGS...
 *
 * Prints one line, "ok" or the errno name of the failure (EACCES, ENOSYS, ...), and exits 0 on
 * success, 1 on failure of the call under test, 2 on a usage error, 3 when a preparatory step (such
 * as opening the fd an fd-form call works on) failed; that line is then "prep:ERRNO".
 *
 * Flags for open-like ops: a comma list of r w rw creat trunc excl nofollow append tmpfile path
 * directory nonblock cloexec (e.g. "w,creat,trunc"). Modes and flags numbers are octal/hex as C.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <utime.h>

#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef AT_EMPTY_PATH
#define AT_EMPTY_PATH 0x1000
#endif

static int out_fd = 1; /* where the result line goes (the "stdout" op moves stdout) */

static void say(const char *s)
{
	char line[128];
	int n = snprintf(line, sizeof line, "%s\n", s);
	if (n > 0 && write(out_fd, line, (size_t)n) < 0)
		_exit(4);
}

static int result(long r, int err)
{
	if (r >= 0) {
		say("ok");
		return 0;
	}
	const char *n = strerrorname_np(err);
	say(n ? n : "EUNKNOWN");
	return 1;
}

static int prep_fail(int err)
{
	char b[64];
	const char *n = strerrorname_np(err);
	snprintf(b, sizeof b, "prep:%s", n ? n : "EUNKNOWN");
	say(b);
	return 3;
}

static int usage(void)
{
	say("usage");
	return 2;
}

static int parse_flags(const char *s)
{
	static const struct {
		const char *name;
		int bits;
	} names[] = {
	    {"r", O_RDONLY},
	    {"w", O_WRONLY},
	    {"rw", O_RDWR},
	    {"creat", O_CREAT},
	    {"trunc", O_TRUNC},
	    {"excl", O_EXCL},
	    {"nofollow", O_NOFOLLOW},
	    {"append", O_APPEND},
	    {"tmpfile", O_TMPFILE},
	    {"path", O_PATH},
	    {"directory", O_DIRECTORY},
	    {"nonblock", O_NONBLOCK},
	    {"cloexec", O_CLOEXEC},
	};
	int f = 0;
	char *dup = strdup(s), *save = NULL;
	if (!dup)
		exit(2);
	for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t i;
		for (i = 0; i < sizeof names / sizeof names[0]; i++)
			if (strcmp(t, names[i].name) == 0)
				break;
		if (i == sizeof names / sizeof names[0]) {
			f |= (int)strtol(t, NULL, 0);
			continue;
		}
		f |= names[i].bits;
	}
	free(dup);
	return f;
}

static unsigned long num(const char *s)
{
	return strtoul(s, NULL, 0);
}

/* Write data to a freshly opened fd, if there is data: the open alone is not the escape. */
static int open_result(int fd, int err, const char *data)
{
	if (fd < 0)
		return result(-1, err);
	if (data) {
		size_t n = strlen(data);
		ssize_t w = write(fd, data, n);
		if (w < 0)
			return result(-1, errno);
	}
	close(fd);
	return result(0, 0);
}

static const struct timespec fixed_times[2] = {{1000000000, 0}, {1000000000, 0}};

/* Operations on an fd of an already opened file (fchmod and friends). */
static int fd_op(int fd, int argc, char **argv)
{
	if (argc < 1)
		return usage();
	const char *op = argv[0];
	long r;
	char p[512];
	if (!strcmp(op, "fchmod") && argc == 2)
		r = syscall(SYS_fchmod, fd, (mode_t)num(argv[1]));
	else if (!strcmp(op, "fchown") && argc == 3)
		r = syscall(SYS_fchown, fd, (uid_t)num(argv[1]), (gid_t)num(argv[2]));
	else if (!strcmp(op, "futimens") && argc == 1)
		r = syscall(SYS_utimensat, fd, NULL, fixed_times, 0);
	else if (!strcmp(op, "futimesat-null") && argc == 1) {
		struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
		r = syscall(SYS_futimesat, fd, NULL, tv);
	} else if (!strcmp(op, "fsetxattr") && argc == 3)
		r = syscall(SYS_fsetxattr, fd, argv[1], argv[2], strlen(argv[2]), 0);
	else if (!strcmp(op, "fremovexattr") && argc == 2)
		r = syscall(SYS_fremovexattr, fd, argv[1]);
	else if (!strcmp(op, "ftruncate") && argc == 2)
		r = syscall(SYS_ftruncate, fd, (off_t)num(argv[1]));
	else if (!strcmp(op, "write") && argc == 2)
		r = write(fd, argv[1], strlen(argv[1]));
	else if (!strcmp(op, "fchmodat-empty") && argc == 2)
		r = syscall(__NR_fchmodat2, fd, "", (mode_t)num(argv[1]), AT_EMPTY_PATH);
	else if (!strcmp(op, "fchmodat2-null") && argc == 2)
		r = syscall(__NR_fchmodat2, fd, NULL, (mode_t)num(argv[1]), 0);
	else if (!strcmp(op, "fchownat-empty") && argc == 3)
		r = syscall(SYS_fchownat, fd, "", (uid_t)num(argv[1]), (gid_t)num(argv[2]),
			    AT_EMPTY_PATH);
	else if (!strcmp(op, "utimensat-empty") && argc == 1)
		r = syscall(SYS_utimensat, fd, "", fixed_times, AT_EMPTY_PATH);
	else if (!strcmp(op, "setxattrat-empty") && argc == 3) {
		struct {
			uint64_t value;
			uint32_t size, flags;
		} xa = {(uint64_t)(uintptr_t)argv[2], (uint32_t)strlen(argv[2]), 0};
		r = syscall(__NR_setxattrat, fd, "", AT_EMPTY_PATH, argv[1], &xa, sizeof xa);
	} else if (!strcmp(op, "linkat-empty") && argc == 2)
		r = syscall(SYS_linkat, fd, "", AT_FDCWD, argv[1], AT_EMPTY_PATH);
	else if (!strcmp(op, "linkat-proc") && argc == 2) {
		snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
		r = syscall(SYS_linkat, AT_FDCWD, p, AT_FDCWD, argv[1], AT_SYMLINK_FOLLOW);
	} else if (!strcmp(op, "setflags") && argc == 2) {
		int fl = (int)num(argv[1]);
		r = ioctl(fd, FS_IOC_SETFLAGS, &fl);
	} else if (!strcmp(op, "setflags32") && argc == 2) {
		int fl = (int)num(argv[1]);
		r = ioctl(fd, 0x40046602UL /* FS_IOC32_SETFLAGS */, &fl);
	} else if (!strcmp(op, "setversion") && argc == 2) {
		int v = (int)num(argv[1]);
		r = ioctl(fd, FS_IOC_SETVERSION, &v);
	} else if (!strcmp(op, "reopen") && (argc == 3 || argc == 4)) {
		/* reopen NAME FLAGS [DATA]: NAME is "/proc/self/fd/", "/dev/fd/", ... (the fd
		 * number appended), or holds "%d" where the number goes; "PID" becomes our pid. */
		char name[512] = "", num_s[16];
		snprintf(num_s, sizeof num_s, "%d", fd);
		const char *q = argv[1];
		bool have_d = strstr(q, "%d") != NULL;
		while (*q && strlen(name) < sizeof name - 32) {
			if (!strncmp(q, "%d", 2)) {
				strcat(name, num_s);
				q += 2;
			} else if (!strncmp(q, "PID", 3)) {
				char pid_s[16];
				snprintf(pid_s, sizeof pid_s, "%d", (int)getpid());
				strcat(name, pid_s);
				q += 3;
			} else {
				size_t l = strlen(name);
				name[l] = *q++;
				name[l + 1] = '\0';
			}
		}
		if (!have_d)
			strcat(name, num_s);
		snprintf(p, sizeof p, "%s", name);
		int nfd = (int)syscall(SYS_openat, AT_FDCWD, p, parse_flags(argv[2]), 0644);
		return open_result(nfd, errno, argc == 4 ? argv[3] : NULL);
	} else if (!strcmp(op, "stdout") && (argc == 2 || argc == 3)) {
		/* stdout FLAGS [DATA]: make the fd our stdout, then open /dev/stdout */
		out_fd = dup(1);
		if (out_fd < 0 || dup2(fd, 1) < 0)
			return prep_fail(errno);
		int nfd =
		    (int)syscall(SYS_openat, AT_FDCWD, "/dev/stdout", parse_flags(argv[1]), 0644);
		return open_result(nfd, errno, argc == 3 ? argv[2] : NULL);
	} else if (!strcmp(op, "at") && argc >= 3) {
		/* at open PATH FLAGS [DATA] | at chmod PATH MODE | at unlink PATH: fd as dirfd */
		if (!strcmp(argv[1], "open") && (argc == 4 || argc == 5)) {
			int nfd = (int)syscall(SYS_openat, fd, argv[2], parse_flags(argv[3]), 0644);
			return open_result(nfd, errno, argc == 5 ? argv[4] : NULL);
		}
		if (!strcmp(argv[1], "chmod") && argc == 4)
			r = syscall(SYS_fchmodat, fd, argv[2], (mode_t)num(argv[3]));
		else if (!strcmp(argv[1], "unlink") && argc == 3)
			r = syscall(SYS_unlinkat, fd, argv[2], 0);
		else
			return usage();
	} else
		return usage();
	return result(r, errno);
}

/* snapshot: one line per path, everything an escape could change (content as FNV-1a 64). */
static int snap_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	char names[65536], val[4096];
	printf("%s %o %u:%u size=%lld nlink=%lu mtime=%lld.%09ld ctime=%lld.%09ld", path,
	       (unsigned)st->st_mode, (unsigned)st->st_uid, (unsigned)st->st_gid,
	       (long long)st->st_size, (unsigned long)st->st_nlink, (long long)st->st_mtim.tv_sec,
	       st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec);
	if (S_ISLNK(st->st_mode)) {
		ssize_t k = readlink(path, val, sizeof val - 1);
		val[k < 0 ? 0 : k] = '\0';
		printf(" -> %s", val);
	} else if (S_ISREG(st->st_mode)) {
		uint64_t h = 1469598103934665603ULL;
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		ssize_t k;
		while (fd >= 0 && (k = read(fd, val, sizeof val)) > 0)
			for (ssize_t i = 0; i < k; i++)
				h = (h ^ (unsigned char)val[i]) * 1099511628211ULL;
		if (fd >= 0)
			close(fd);
		printf(" %016llx", (unsigned long long)h);
	}
	ssize_t k = llistxattr(path, names, sizeof names);
	for (ssize_t i = 0; i < k; i += (ssize_t)strlen(names + i) + 1) {
		ssize_t v = lgetxattr(path, names + i, val, sizeof val);
		printf(" %s=", names + i);
		for (ssize_t j = 0; j < v; j++)
			printf("%02x", (unsigned char)val[j]);
	}
	printf("\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage();
	const char *op = argv[1];
	char **a = argv + 2;
	int n = argc - 2;
	long r;

	if (!strcmp(op, "snapshot")) {
		for (int i = 0; i < n; i++)
			if (nftw(a[i], snap_one, 16, FTW_PHYS) < 0)
				printf("%s absent\n", a[i]);
		return 0;
	}
	if (!strcmp(op, "open") && (n == 2 || n == 3)) {
		int fd = (int)syscall(SYS_open, a[0], parse_flags(a[1]), 0644);
		return open_result(fd, errno, n == 3 ? a[2] : NULL);
	}
	if (!strcmp(op, "openat2") && (n == 2 || n == 3)) {
		struct open_how how = {.flags = (uint64_t)parse_flags(a[1])};
		if (how.flags & (O_CREAT | O_TMPFILE))
			how.mode = 0644;
		int fd = (int)syscall(SYS_openat2, AT_FDCWD, a[0], &how, sizeof how);
		return open_result(fd, errno, n == 3 ? a[2] : NULL);
	}
	if (!strcmp(op, "creat") && (n == 1 || n == 2)) {
		int fd = (int)syscall(SYS_creat, a[0], 0644);
		return open_result(fd, errno, n == 2 ? a[1] : NULL);
	}
	if (!strcmp(op, "truncate") && n == 2)
		r = syscall(SYS_truncate, a[0], (off_t)num(a[1]));
	else if (!strcmp(op, "chmod") && n == 2)
		r = syscall(SYS_chmod, a[0], (mode_t)num(a[1]));
	else if (!strcmp(op, "lchmod") && n == 2)
		r = syscall(__NR_fchmodat2, AT_FDCWD, a[0], (mode_t)num(a[1]), AT_SYMLINK_NOFOLLOW);
	else if (!strcmp(op, "chown") && n == 3)
		r = syscall(SYS_chown, a[0], (uid_t)num(a[1]), (gid_t)num(a[2]));
	else if (!strcmp(op, "lchown") && n == 3)
		r = syscall(SYS_lchown, a[0], (uid_t)num(a[1]), (gid_t)num(a[2]));
	else if (!strcmp(op, "utimes") && n == 1) {
		struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
		r = syscall(SYS_utimes, a[0], tv);
	} else if (!strcmp(op, "utime") && n == 1) {
		struct utimbuf ub = {1000000000, 1000000000};
		r = syscall(SYS_utime, a[0], &ub);
	} else if (!strcmp(op, "utimensat") && n == 1)
		r = syscall(SYS_utimensat, AT_FDCWD, a[0], fixed_times, 0);
	else if (!strcmp(op, "lutimes") && n == 1)
		r = syscall(SYS_utimensat, AT_FDCWD, a[0], fixed_times, AT_SYMLINK_NOFOLLOW);
	else if (!strcmp(op, "setxattr") && n == 3)
		r = syscall(SYS_setxattr, a[0], a[1], a[2], strlen(a[2]), 0);
	else if (!strcmp(op, "lsetxattr") && n == 3)
		r = syscall(SYS_lsetxattr, a[0], a[1], a[2], strlen(a[2]), 0);
	else if (!strcmp(op, "removexattr") && n == 2)
		r = syscall(SYS_removexattr, a[0], a[1]);
	else if (!strcmp(op, "rename") && n == 2)
		r = syscall(SYS_rename, a[0], a[1]);
	else if (!strcmp(op, "renameat2") && n == 3) {
		unsigned f = 0;
		if (strstr(a[2], "exchange"))
			f |= RENAME_EXCHANGE;
		if (strstr(a[2], "noreplace"))
			f |= RENAME_NOREPLACE;
		if (strstr(a[2], "whiteout"))
			f |= RENAME_WHITEOUT;
		r = syscall(SYS_renameat2, AT_FDCWD, a[0], AT_FDCWD, a[1], f);
	} else if (!strcmp(op, "link") && n == 2)
		r = syscall(SYS_link, a[0], a[1]);
	else if (!strcmp(op, "linkf") && n == 2)
		r = syscall(SYS_linkat, AT_FDCWD, a[0], AT_FDCWD, a[1], AT_SYMLINK_FOLLOW);
	else if (!strcmp(op, "symlink") && n == 2)
		r = syscall(SYS_symlink, a[0], a[1]);
	else if (!strcmp(op, "unlink") && n == 1)
		r = syscall(SYS_unlink, a[0]);
	else if (!strcmp(op, "rmdir") && n == 1)
		r = syscall(SYS_rmdir, a[0]);
	else if (!strcmp(op, "mkdir") && n == 1)
		r = syscall(SYS_mkdir, a[0], 0755);
	else if (!strcmp(op, "mknod") && (n == 2 || n == 4)) {
		mode_t t = a[1][0] == 'c'   ? S_IFCHR
			   : a[1][0] == 'b' ? S_IFBLK
			   : a[1][0] == 'p' ? S_IFIFO
			   : a[1][0] == 's' ? S_IFSOCK
					    : S_IFREG;
		dev_t dev = n == 4 ? makedev((unsigned)num(a[2]), (unsigned)num(a[3])) : 0;
		r = syscall(SYS_mknod, a[0], t | 0666, dev);
	} else if (!strcmp(op, "tmpfile") && n == 3) {
		/* tmpfile DIR DEST empty|proc: an O_TMPFILE in DIR, written, then linked at DEST */
		int fd = (int)syscall(SYS_open, a[0], O_TMPFILE | O_RDWR, 0600);
		if (fd < 0)
			return prep_fail(errno);
		if (write(fd, "tmpfile\n", 8) != 8)
			return prep_fail(errno);
		if (!strcmp(a[2], "empty"))
			r = syscall(SYS_linkat, fd, "", AT_FDCWD, a[1], AT_EMPTY_PATH);
		else {
			char p[64];
			snprintf(p, sizeof p, "/proc/self/fd/%d", fd);
			r = syscall(SYS_linkat, AT_FDCWD, p, AT_FDCWD, a[1], AT_SYMLINK_FOLLOW);
		}
	} else if (!strcmp(op, "xattrs") && n == 1) {
		/* xattrs PATH: every xattr name=hex(value), sorted as the kernel lists them (no
		 * change) */
		char names[65536], val[65536], line[256];
		ssize_t k = llistxattr(a[0], names, sizeof names);
		if (k < 0)
			return errno == ENOTSUP ? 0 : result(-1, errno);
		for (ssize_t i = 0; i < k; i += (ssize_t)strlen(names + i) + 1) {
			ssize_t v = lgetxattr(a[0], names + i, val, sizeof val);
			int m = snprintf(line, sizeof line, "%s=", names + i);
			for (ssize_t j = 0; j < v && m < (int)sizeof line - 3; j++)
				m += snprintf(line + m, sizeof line - (size_t)m, "%02x",
					      (unsigned char)val[j]);
			printf("%s\n", line);
		}
		return 0;
	} else if (!strcmp(op, "fd") && n >= 3) {
		/* fd PATH OPENFLAGS SUBOP...: open PATH (read-only, O_PATH, ...) then SUBOP on the
		 * fd */
		int fd = (int)syscall(SYS_openat, AT_FDCWD, a[0], parse_flags(a[1]), 0);
		if (fd < 0)
			return prep_fail(errno);
		return fd_op(fd, n - 2, a + 2);
	} else
		return usage();
	return result(r, errno);
}
