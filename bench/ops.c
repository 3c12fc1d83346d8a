/* SPDX-License-Identifier: MIT */
/*
 * ops: time N iterations of one file operation in the current directory and print the mean cost
 * per operation in microseconds (one number on stdout). Used by bench/run.sh, natively and under
 * `brokered run --`.
 *
 *   ops read N      open(O_RDONLY) + close of an existing file
 *   ops write N     open(O_WRONLY) + close of an existing file (no truncation)
 *   ops trunc N     open(O_WRONLY|O_TRUNC) + close of an existing file
 *   ops create N    open(O_WRONLY|O_CREAT|O_EXCL) + close + unlink of a new file
 *   ops rename N    rename a -> b -> a
 *   ops stat N      stat of an existing file (baseline: never notified)
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: ops read|write|trunc|create|rename|stat N\n");
		return 2;
	}
	const char *op = argv[1];
	long n = strtol(argv[2], NULL, 10);
	const char *f = "bench-ops.file";
	int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, "x\n", 2) != 2)
		die("setup");
	close(fd);
	struct stat st;

	double t0 = now_us();
	for (long i = 0; i < n; i++) {
		if (!strcmp(op, "read")) {
			if ((fd = open(f, O_RDONLY | O_CLOEXEC)) < 0)
				die("open");
			close(fd);
		} else if (!strcmp(op, "write")) {
			if ((fd = open(f, O_WRONLY | O_CLOEXEC)) < 0)
				die("open");
			close(fd);
		} else if (!strcmp(op, "trunc")) {
			if ((fd = open(f, O_WRONLY | O_TRUNC | O_CLOEXEC)) < 0)
				die("open");
			close(fd);
		} else if (!strcmp(op, "create")) {
			if ((fd = open("bench-ops.new", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
				die("open");
			close(fd);
			if (unlink("bench-ops.new") < 0)
				die("unlink");
		} else if (!strcmp(op, "rename")) {
			if (rename(f, "bench-ops.b") < 0 || rename("bench-ops.b", f) < 0)
				die("rename");
		} else if (!strcmp(op, "stat")) {
			if (stat(f, &st) < 0)
				die("stat");
		} else {
			fprintf(stderr, "unknown op %s\n", op);
			return 2;
		}
	}
	double t1 = now_us();
	unlink(f);
	printf("%.3f\n", (t1 - t0) / (double)n);
	return 0;
}
