/* SPDX-License-Identifier: MIT */
/*
 * escape-race: races against the broker's check-then-act, for tests/e2e/t0406-escape-race.sh.
 *
 *   escape-race flip OP GOOD BAD N     one thread makes OP on a shared path buffer N times while
 *                                      another flips the buffer between GOOD and BAD
 *                                      OP: open (O_WRONLY|O_CREAT, writes "pwned"), trunc
 *                                      (O_WRONLY|O_TRUNC), chmod (0777), truncate, utimes,
 *                                      setxattr, rename (renames scratch file $TMPDIR/src to the
 *                                      buffer), link (links $TMPDIR/src to the buffer)
 *   escape-race how PATH N             openat2(PATH) N times with how.flags flipping between
 *                                      O_RDONLY and O_WRONLY|O_TRUNC in memory
 *   escape-race swap OP LINK GOOD BAD N  one thread swaps the symlink LINK between GOOD and BAD
 *                                      (symlink + rename); another makes OP (open, trunc, chmod,
 *                                      truncate, utimes, setxattr) on LINK N times
 *   escape-race dirswap DIR REAL BAD N   DIR alternates between the directory REAL and a symlink to
 *                                      BAD; another thread opens DIR/y (O_TRUNC) N times
 *
 * Prints "done successes=S failures=F" and exits 0; the test checks the files.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#define BUFSZ 4096

static char buf[BUFSZ] __attribute__((aligned(64)));
static char good[BUFSZ], bad[BUFSZ];
static struct open_how how_shared;
static atomic_int stop;
static const char *g_link, *g_real, *g_dir;
static long successes, failures;

static void *flipper(void *arg)
{
	(void)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		memcpy(buf, bad, BUFSZ);
		memcpy(buf, good, BUFSZ);
	}
	return NULL;
}

static void *how_flipper(void *arg)
{
	(void)arg;
	volatile __u64 *f = &how_shared.flags;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		*f = O_WRONLY | O_TRUNC;
		*f = O_RDONLY;
	}
	return NULL;
}

static void *swapper(void *arg)
{
	(void)arg;
	char tmp[BUFSZ];
	snprintf(tmp, sizeof tmp, "%s.swap", g_link);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unlink(tmp);
		if (symlink(bad, tmp) == 0)
			rename(tmp, g_link);
		unlink(tmp);
		if (symlink(good, tmp) == 0)
			rename(tmp, g_link);
	}
	return NULL;
}

static void *dirswapper(void *arg)
{
	(void)arg;
	char tmp[BUFSZ];
	snprintf(tmp, sizeof tmp, "%s.swap", g_dir);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unlink(tmp);
		if (symlink(bad, tmp) == 0)
			renameat2(AT_FDCWD, tmp, AT_FDCWD, g_dir, RENAME_EXCHANGE);
		/* g_dir is the symlink now, tmp the real dir: swap back */
		renameat2(AT_FDCWD, tmp, AT_FDCWD, g_dir, RENAME_EXCHANGE);
	}
	(void)g_real;
	return NULL;
}

static void count(long r)
{
	if (r >= 0)
		successes++;
	else
		failures++;
}

static void do_op(const char *op, const char *path)
{
	static const struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
	if (!strcmp(op, "open") || !strcmp(op, "trunc")) {
		int fl = !strcmp(op, "open") ? O_WRONLY | O_CREAT : O_WRONLY | O_TRUNC;
		int fd = (int)syscall(SYS_openat, AT_FDCWD, path, fl, 0644);
		count(fd);
		if (fd >= 0) {
			if (write(fd, "pwned", 5) < 0)
				failures++;
			close(fd);
		}
	} else if (!strcmp(op, "chmod"))
		count(syscall(SYS_chmod, path, 0777));
	else if (!strcmp(op, "truncate"))
		count(syscall(SYS_truncate, path, 0));
	else if (!strcmp(op, "utimes"))
		count(syscall(SYS_utimes, path, tv));
	else if (!strcmp(op, "setxattr"))
		count(syscall(SYS_setxattr, path, "user.x", "pwned", 5, 0));
	else if (!strcmp(op, "rename") || !strcmp(op, "link")) {
		char src[BUFSZ];
		const char *t = getenv("TMPDIR");
		snprintf(src, sizeof src, "%s/src", t ? t : "/tmp");
		int fd = open(src, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd >= 0) {
			if (write(fd, "pwned", 5) < 0)
				failures++;
			close(fd);
		}
		if (!strcmp(op, "rename"))
			count(syscall(SYS_rename, src, path));
		else
			count(syscall(SYS_link, src, path));
	} else {
		fprintf(stderr, "unknown op %s\n", op);
		exit(2);
	}
}

int main(int argc, char **argv)
{
	pthread_t th;
	if (argc == 6 && !strcmp(argv[1], "flip")) {
		long n = atol(argv[5]);
		snprintf(good, sizeof good, "%s", argv[3]);
		snprintf(bad, sizeof bad, "%s", argv[4]);
		memcpy(buf, good, BUFSZ);
		if (pthread_create(&th, NULL, flipper, NULL))
			return 2;
		for (long i = 0; i < n; i++)
			do_op(argv[2], buf);
	} else if (argc == 4 && !strcmp(argv[1], "how")) {
		long n = atol(argv[3]);
		if (pthread_create(&th, NULL, how_flipper, NULL))
			return 2;
		for (long i = 0; i < n; i++) {
			int fd = (int)syscall(SYS_openat2, AT_FDCWD, argv[2], &how_shared,
					      sizeof how_shared);
			count(fd);
			if (fd >= 0) {
				/* a write succeeds only if the fd was opened for writing */
				if (write(fd, "pwned", 5) == 5)
					successes += 1000000;
				close(fd);
			}
		}
	} else if (argc == 7 && !strcmp(argv[1], "swap")) {
		long n = atol(argv[6]);
		g_link = argv[3];
		snprintf(good, sizeof good, "%s", argv[4]);
		snprintf(bad, sizeof bad, "%s", argv[5]);
		if (pthread_create(&th, NULL, swapper, NULL))
			return 2;
		for (long i = 0; i < n; i++)
			do_op(argv[2], g_link);
	} else if (argc == 6 && !strcmp(argv[1], "dirswap")) {
		long n = atol(argv[5]);
		g_dir = argv[2];
		g_real = argv[3];
		snprintf(bad, sizeof bad, "%s", argv[4]);
		char p[BUFSZ];
		snprintf(p, sizeof p, "%s/y", g_dir);
		if (pthread_create(&th, NULL, dirswapper, NULL))
			return 2;
		for (long i = 0; i < n; i++)
			do_op("trunc", p);
	} else {
		fprintf(stderr, "usage\n");
		return 2;
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	printf("done successes=%ld failures=%ld\n", successes, failures);
	return 0;
}
