/* SPDX-License-Identifier: MIT */
/*
 * snapshot DIR: every path below DIR (the top level's .brokered* left out), one line each, sorted
 * by the path's bytes: the path (relative, bytes outside printable ASCII, space and backslash as
 * \xNN), then its type and mode: "F mode size hash" (a 64-bit FNV-1a of the content: the tests
 * compare snapshots of trees they made, nobody chooses a collision), "D mode", "L target",
 * "P mode" (FIFO), "S mode" (socket), "N mode major:minor" (device). Never opens anything but
 * regular files and directories (a FIFO would block). The tests' tree_snapshot_any (tests/lib.sh):
 * a process start of a millisecond instead of Python's fifty, two or more times per check.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

struct line {
	char *path; /* raw bytes, for sorting */
	char *text;
};

static struct line *lines;
static size_t n_lines, cap_lines;

static void die(const char *what, const char *path)
{
	fprintf(stderr, "snapshot: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void escaped(FILE *f, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p; p++)
		if (*p <= ' ' || *p >= 0x7f || *p == '\\')
			fprintf(f, "\\x%02x", *p);
		else
			fputc(*p, f);
}

static void content_hash(int at, const char *name, const char *path, uint64_t *ret)
{
	int fd = openat(at, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		die("open", path);
	uint64_t h = 0xcbf29ce484222325ULL;
	char buf[65536];
	ssize_t k;
	while ((k = read(fd, buf, sizeof buf)) > 0)
		for (ssize_t i = 0; i < k; i++)
			h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ULL;
	if (k < 0)
		die("read", path);
	close(fd);
	*ret = h;
}

static void add(int at, const char *name, const char *rel)
{
	struct stat st;
	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		die("stat", rel);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		die("memory", rel);
	escaped(f, rel);
	unsigned mode = st.st_mode & 07777;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX + 1];
		ssize_t k = readlinkat(at, name, target, PATH_MAX);
		if (k < 0)
			die("readlink", rel);
		target[k] = '\0';
		fputs(" L ", f);
		escaped(f, target);
	} else if (S_ISDIR(st.st_mode)) {
		fprintf(f, " D %o", mode);
	} else if (S_ISREG(st.st_mode)) {
		uint64_t h;
		content_hash(at, name, rel, &h);
		fprintf(f, " F %o %lld %016llx", mode, (long long)st.st_size,
			(unsigned long long)h);
	} else if (S_ISFIFO(st.st_mode)) {
		fprintf(f, " P %o", mode);
	} else if (S_ISSOCK(st.st_mode)) {
		fprintf(f, " S %o", mode);
	} else {
		fprintf(f, " N %o %x:%x", mode, major(st.st_rdev), minor(st.st_rdev));
	}
	if (fclose(f) != 0)
		die("memory", rel);
	if (n_lines == cap_lines) {
		cap_lines = cap_lines ? 2 * cap_lines : 256;
		if (!(lines = reallocarray(lines, cap_lines, sizeof *lines)))
			die("memory", rel);
	}
	if (!(lines[n_lines].path = strdup(rel)))
		die("memory", rel);
	lines[n_lines++].text = text;
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd < 0 ? NULL : fdopendir(fd);
		if (!d)
			die("open", rel);
		struct dirent *de;
		while ((errno = 0, de = readdir(d))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (!*rel && !strncmp(de->d_name, ".brokered", 9))
				continue;
			char *child;
			if (asprintf(&child, "%s%s%s", rel, *rel ? "/" : "", de->d_name) < 0)
				die("memory", rel);
			add(dirfd(d), de->d_name, child);
			free(child);
		}
		if (errno)
			die("readdir", rel);
		closedir(d);
	}
}

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->path, ((const struct line *)b)->path);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: snapshot DIR\n");
		return 2;
	}
	add(AT_FDCWD, argv[1], "");
	/* the top directory itself is not a path below it */
	qsort(lines + 1, n_lines - 1, sizeof *lines, by_path);
	for (size_t i = 1; i < n_lines; i++)
		puts(lines[i].text);
	return fflush(stdout) == 0 ? 0 : 1;
}
