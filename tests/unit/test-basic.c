/* SPDX-License-Identifier: MIT */
/* The helpers of src/basic/: fd-util, fs-util, hexdecoct, string-table, errno-util, strbuf,
 * escape. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/errno-util.h"
#include "basic/escape.h"
#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/hexdecoct.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/socket-util.h"
#include "basic/strbuf.h"
#include "basic/string-table.h"
#include "tap.h"

enum color { COLOR_RED, COLOR_GREEN, COLOR_HOLE, COLOR_BLUE, _COLOR_MAX, _COLOR_INVALID = -EINVAL };
static const char *const color_table[] = {
    [COLOR_RED] = "red",
    [COLOR_GREEN] = "green",
    [COLOR_BLUE] = "blue",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(color, enum color);
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_FROM_STRING(color, enum color);

static void string_table(void)
{
	is_str(color_to_string(COLOR_GREEN), "green", "to_string");
	ok(color_to_string(COLOR_HOLE) == NULL, "a value without a name gives NULL");
	ok(color_to_string(_COLOR_MAX) == NULL && color_to_string((enum color) - 1) == NULL,
	   "out of range gives NULL");
	is_int(color_from_string("blue"), COLOR_BLUE, "from_string");
	is_int(color_from_string("Blue"), -EINVAL, "from_string is exact");
	is_int(color_from_string(NULL), -EINVAL, "from_string(NULL)");
	is_int(color_from_string(""), -EINVAL, "no empty name");
}

static void hex_and_names(void)
{
	is_int(unhexchar('0'), 0, "unhexchar 0");
	is_int(unhexchar('9'), 9, "unhexchar 9");
	is_int(unhexchar('a'), 10, "unhexchar a");
	is_int(unhexchar('F'), 15, "unhexchar F");
	is_int(unhexchar('g'), -EINVAL, "unhexchar g");
	is_int(unhexchar('\0'), -EINVAL, "unhexchar NUL");

	is_str(ERRNO_NAME(ENOENT), "ENOENT", "ENOENT");
	is_str(ERRNO_NAME(-EACCES), "EACCES", "negative errno");
	is_str(ERRNO_NAME(EOPNOTSUPP), "EOPNOTSUPP", "EOPNOTSUPP (= ENOTSUP)");
	is_str(ERRNO_NAME(EAGAIN), "EAGAIN", "EAGAIN (= EWOULDBLOCK)");
	is_str(ERRNO_NAME(4095), "errno4095", "unknown number");
	is_str(ERRNO_NAME(INT_MIN), "errno2147483648", "INT_MIN");

	is_str(FORMAT_PROC_FD_PATH(7), "/proc/self/fd/7", "FORMAT_PROC_FD_PATH");
	is_str(FORMAT_PROC_FD_PATH(INT_MIN), "/proc/self/fd/-2147483648", "  fits any int");
	ok(dot_or_dot_dot(".") && dot_or_dot_dot("..") && !dot_or_dot_dot("...") &&
	       !dot_or_dot_dot(".a") && !dot_or_dot_dot(""),
	   "dot_or_dot_dot");
}

static void nonblock(void)
{
	int p[2];
	ok(pipe2(p, O_CLOEXEC) == 0, "pipe");
	ok(fd_nonblock(p[0], true) == 0 && (fcntl(p[0], F_GETFL) & O_NONBLOCK), "set O_NONBLOCK");
	char c;
	ok(read(p[0], &c, 1) < 0 && errno == EAGAIN, "  a read does not block");
	ok(fd_nonblock(p[0], false) == 0 && !(fcntl(p[0], F_GETFL) & O_NONBLOCK),
	   "clear O_NONBLOCK");
	ok(fcntl(p[0], F_GETFD) & FD_CLOEXEC, "  other flags kept");
	is_int(fd_nonblock(-1, false), -EBADF, "bad fd");
	close(p[0]);
	close(p[1]);
}

static int put(int dirfd, const char *name, const char *data)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, data, strlen(data));
	close(fd);
	return n == (ssize_t)strlen(data) ? 0 : -1;
}

static void trees(int top)
{
	ok(mkdirat(top, "t", 0700) == 0 && mkdirat(top, "t/a", 0700) == 0 &&
	       mkdirat(top, "t/a/b", 0700) == 0 && put(top, "t/a/b/f", "x") == 0 &&
	       put(top, "t/g", "y") == 0 && symlinkat("/", top, "t/a/to-root") == 0 &&
	       mkdirat(top, "keep", 0700) == 0 && put(top, "keep/k", "k") == 0 &&
	       symlinkat("../keep", top, "t/to-keep") == 0,
	   "a tree with files, directories and symlinks");
	is_int(dir_is_empty_at(top, "t"), 0, "dir_is_empty_at: not empty");
	ok(mkdirat(top, "e", 0700) == 0, "an empty directory");
	is_int(dir_is_empty_at(top, "e"), 1, "dir_is_empty_at: empty");
	ok(symlinkat("e", top, "link-e") == 0, "a symlink to it");
	ok(dir_is_empty_at(top, "link-e") < 0, "dir_is_empty_at does not follow a symlink");
	is_int(dir_is_empty_at(top, "t/g"), -ENOTDIR, "dir_is_empty_at on a file");
	DIR *d = opendir_at(top, "link-e");
	ok(!d && (errno == ENOTDIR || errno == ELOOP), "opendir_at does not follow a symlink");
	d = opendir_at(top, "e");
	ok(d != NULL, "opendir_at on a directory");
	if (d)
		closedir(d);
	errno = 0;
	ok(xfdopendir(-1) == NULL && errno == EBADF, "xfdopendir(-1): NULL, errno kept");
	is_int(dir_is_empty_at(top, "nope"), -ENOENT, "dir_is_empty_at on nothing");

	is_int(rm_rf_at(top, "t"), 0, "rm_rf_at removes the tree");
	ok(faccessat(top, "t", F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT, "  it is gone");
	ok(faccessat(top, "keep/k", F_OK, 0) == 0, "  symlinks were not followed");
	is_int(rm_rf_at(top, "link-e"), 0, "rm_rf_at on a symlink removes the link");
	ok(faccessat(top, "e", F_OK, 0) == 0, "  not its target");
	is_int(rm_rf_at(top, "keep/k"), 0, "rm_rf_at on a file");
	is_int(rm_rf_at(top, "nope"), -ENOENT, "rm_rf_at on nothing: -ENOENT");
}

/* proc_fd_at() names an fd of this process, and in a forked child the child's own. */
static void proc_fd_names(int top)
{
	int a = openat(top, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	char want[PATH_MAX], got[PATH_MAX];
	ssize_t wn = readlink(FORMAT_PROC_FD_PATH(a), want, sizeof want - 1);
	struct proc_fd_at at = proc_fd_at(a);
	ssize_t gn = readlinkat(at.dirfd, at.name, got, sizeof got - 1);
	ok(wn > 0 && gn == wn && memcmp(got, want, (size_t)wn) == 0 && at.dirfd != AT_FDCWD,
	   "proc_fd_at: the fd's magic link, through the cached /proc/self/fd");
	pid_t pid = fork();
	if (pid == 0) {
		/* the same number, another file: the parent's /proc/PID/fd would name the old one
		 */
		close(a);
		int b = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
		at = proc_fd_at(b);
		gn = readlinkat(at.dirfd, at.name, got, sizeof got - 1);
		_exit(b == a && gn == 1 && got[0] == '/' ? 0 : 1);
	}
	int st = -1;
	ok(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "  in a forked child, the child's fd");
	close(a);
}

static void copies(int top)
{
	/* file to file: copy_file_range */
	char big[200000];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (char)('a' + i % 26);
	int src = openat(top, "src", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	int dst = openat(top, "dst", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ok(src >= 0 && dst >= 0 && write(src, big, sizeof big) == (ssize_t)sizeof big,
	   "a 200 kB source");
	ok(lseek(src, 1000, SEEK_SET) == 1000, "  read from offset 1000");
	is_int(copy_bytes(src, dst), 0, "copy_bytes file to file");
	static char back[sizeof big];
	ok(pread(dst, back, sizeof back, 0) == (ssize_t)(sizeof big - 1000) &&
	       memcmp(back, big + 1000, sizeof big - 1000) == 0,
	   "  the rest of the source, byte for byte");

	/* pipe to file: copy_file_range refuses, read and write copy */
	int p[2];
	ok(pipe2(p, O_CLOEXEC) == 0 && write(p[1], "through a pipe", 14) == 14, "a pipe");
	close(p[1]);
	ok(ftruncate(dst, 0) == 0 && lseek(dst, 0, SEEK_SET) == 0, "  empty destination");
	is_int(copy_bytes(p[0], dst), 0, "copy_bytes from a pipe (read and write)");
	memset(back, 0, 32);
	ok(pread(dst, back, 32, 0) == 14 && memcmp(back, "through a pipe", 14) == 0,
	   "  the pipe's bytes");
	close(p[0]);
	is_int(copy_bytes(src, -1), -EBADF, "copy_bytes to a bad fd");
	close(src);
	close(dst);
}

/* Receive one message on sock into buf; the fd cmsg_take_first_fd() kept. */
static int recv_one(int sock, char *buf, size_t n, ssize_t *ret_len)
{
	struct iovec iov = {buf, n};
	union {
		char b[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} u;
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
	*ret_len = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	return cmsg_take_first_fd(&mh);
}

static void fd_passing(int top)
{
	int sp[2];
	ok(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0, "socket pair");
	int f = openat(top, "passed", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	ok(f >= 0 && write(f, "passed", 6) == 6, "a file to pass");
	is_int(send_with_fd(sp[0], "FD\n", 3, f, MSG_NOSIGNAL), 3, "send_with_fd: the bytes sent");
	char buf[16];
	ssize_t n;
	int got = recv_one(sp[1], buf, sizeof buf, &n);
	ok(n == 3 && memcmp(buf, "FD\n", 3) == 0, "  the line arrives");
	struct stat a, b;
	ok(got >= 0 && fstat(got, &a) == 0 && fstat(f, &b) == 0 && a.st_ino == b.st_ino &&
	       a.st_dev == b.st_dev,
	   "  with the fd: the same file");
	if (got >= 0)
		close(got);
	is_int(send_with_fd(sp[0], "x", 1, -1, MSG_NOSIGNAL), 1, "send_with_fd without an fd");
	got = recv_one(sp[1], buf, sizeof buf, &n);
	ok(n == 1 && got == -1, "  no fd taken");

	/* two fds in one message: the first is kept, the second closed */
	int p[2];
	ok(pipe2(p, O_CLOEXEC) == 0 && fd_nonblock(p[0], true) == 0, "a pipe");
	int two[2] = {f, p[1]};
	union {
		char b[CMSG_SPACE(sizeof two)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	char y[] = "y";
	struct iovec iov = {y, 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof two);
	memcpy(CMSG_DATA(cm), two, sizeof two);
	ok(sendmsg(sp[0], &mh, MSG_NOSIGNAL) == 1, "a message with two fds");
	close(p[1]);
	got = recv_one(sp[1], buf, sizeof buf, &n);
	ok(got >= 0 && fstat(got, &a) == 0 && a.st_ino == b.st_ino, "  the first is kept");
	/* the pipe's only other write end was the one passed: closed, so the reader sees EOF */
	ok(read(p[0], buf, 1) == 0, "  the second was closed");
	if (got >= 0)
		close(got);
	is_int(send_with_fd(-1, "x", 1, -1, 0), -EBADF, "send_with_fd on a bad socket");
	close(p[0]);
	close(f);
	close(sp[0]);
	close(sp[1]);
}

/* strbuf_printf() formats into the room left and grows when the output does not fit. */
static void strbuf_formats(void)
{
	struct strbuf sb = STRBUF_INIT;
	char want[600], chunk[32];
	size_t wl = 0;
	bool same = true;
	for (size_t i = 0; i < 30 && same; i++) {
		/* 2 to 31 characters each: the outputs cross the 64, 128 and 256 boundaries */
		memset(chunk, 'a' + (int)i % 26, i + 1);
		chunk[i + 1] = '\0';
		same = strbuf_printf(&sb, "%s%c", chunk, '|') == 0;
		memcpy(want + wl, chunk, i + 1);
		want[wl + i + 1] = '|';
		wl += i + 2;
		want[wl] = '\0';
		same = same && sb.len == wl && strcmp(sb.buf, want) == 0;
	}
	ok(same, "strbuf_printf: appends that fit and appends that grow the buffer");
	strbuf_reset(&sb);
	ok(strbuf_printf(&sb, "%s", "") == 0 && sb.len == 0 && strcmp(strbuf_cstr(&sb), "") == 0,
	   "strbuf_printf of nothing");
	strbuf_free(&sb);
}

/* strbuf_append_u64() and _i64() give what printf's %o, %u, %0*x and PRId64 give. */
static void strbuf_numbers(void)
{
	static const uint64_t us[] = {
	    0,		1,	   7,	8,    9,       10,	    15,
	    16,		255,	   256, 0777, 0100644, 4294967295u, 4294967296ull,
	    1ull << 63, UINT64_MAX};
	static const int64_t is[] = {0, -1, 1, -9, 10, INT64_MAX, INT64_MIN, -1500000000};
	bool same = true;
	for (size_t i = 0; i < ELEMENTSOF(us); i++)
		for (unsigned w = 0; w <= 24; w += 8) {
			struct strbuf sb = STRBUF_INIT;
			char want[128];
			snprintf(want, sizeof want, "%0*" PRIo64 "|%0*" PRIu64 "|%0*" PRIx64,
				 (int)w, us[i], (int)w, us[i], (int)w, us[i]);
			strbuf_append_u64(&sb, us[i], 8, w);
			strbuf_appendc(&sb, '|');
			strbuf_append_u64(&sb, us[i], 10, w);
			strbuf_appendc(&sb, '|');
			strbuf_append_u64(&sb, us[i], 16, w);
			if (strcmp(strbuf_cstr(&sb), want) != 0) {
				printf("# got %s, want %s\n", strbuf_cstr(&sb), want);
				same = false;
			}
			strbuf_free(&sb);
		}
	ok(same, "strbuf_append_u64: as %%o, %%u and %%x, zero-padded to a width");
	same = true;
	for (size_t i = 0; i < ELEMENTSOF(is); i++) {
		struct strbuf sb = STRBUF_INIT;
		char want[32];
		snprintf(want, sizeof want, "%" PRId64, is[i]);
		strbuf_append_i64(&sb, is[i]);
		same = same && strcmp(strbuf_cstr(&sb), want) == 0;
		strbuf_free(&sb);
	}
	ok(same, "strbuf_append_i64: as %%" PRId64 ", INT64_MIN too");
	struct strbuf sb = STRBUF_INIT;
	is_int(strbuf_append_u64(&sb, 5, 2, 0), -EINVAL, "strbuf_append_u64: only bases 8, 10, 16");
	strbuf_free(&sb);
}

/* escape_append(): bytes that need no escape are kept, the others become \xHH; it reverses. */
static void escapes(void)
{
	struct strbuf sb = STRBUF_INIT, back = STRBUF_INIT;
	ok(escape_appends(&sb, "a b=c\\d\"e'f\tg\x7fh\xffi/j.k") == 0, "escape");
	is_str(strbuf_cstr(&sb), "a\\x20b\\x3dc\\x5cd\\x22e\\x27f\\x09g\\x7fh\\xffi/j.k",
	       "  the escaped bytes, the runs between them kept");
	char all[255];
	for (int i = 0; i < 255; i++)
		all[i] = (char)(i + 1);
	strbuf_reset(&sb);
	ok(escape_append(&sb, all, sizeof all) == 0 &&
	       unescape_append(&back, sb.buf, sb.len) == 0 && back.len == sizeof all &&
	       memcmp(back.buf, all, sizeof all) == 0,
	   "every byte but NUL escapes and unescapes to itself");
	strbuf_reset(&back);
	ok(unescape_append(&back, "ab\\x41cd\\x5c", 12) == 0, "unescape");
	is_str(strbuf_cstr(&back), "abAcd\\", "  the escapes decoded, the runs between them kept");
	static const char *const bad[] = {"a b",    "a\\x00", "a\\x4", "a\\y41",
					  "a\\xg1", "\t",     "\x80"};
	bool refused = true;
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		strbuf_reset(&back);
		refused = refused && unescape_append(&back, bad[i], strlen(bad[i])) == -EINVAL;
	}
	ok(refused,
	   "unescape refuses a plain byte that needs an escape, a bad or short escape, NUL");
	strbuf_reset(&sb);
	ok(escape_append(&sb, "", 0) == 0 && strcmp(strbuf_cstr(&sb), "") == 0,
	   "escape of nothing");
	strbuf_free(&sb);
	strbuf_free(&back);
}

int main(void)
{
	string_table();
	strbuf_formats();
	strbuf_numbers();
	escapes();
	hex_and_names();
	nonblock();
	char tmpl[] = "/tmp/test-basic-XXXXXX";
	ok(mkdtemp(tmpl) != NULL, "temp dir");
	int top = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	trees(top);
	proc_fd_names(top);
	copies(top);
	fd_passing(top);
	close(top);
	ok(rm_rf_at(AT_FDCWD, tmpl) == 0, "temp dir removed");
	return tap_done();
}
