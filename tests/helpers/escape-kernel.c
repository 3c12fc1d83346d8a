/* SPDX-License-Identifier: MIT */
/*
 * escape-kernel: attempts below the file API, for tests/e2e/t0408 and t0409.
 *
 *   escape-kernel OP [ARGS]   prints "ok" or the errno name (see escape-sys), exit 0/1
 *
 *   io_uring | seccomp-listener | seccomp-tsync-listener | mount DIR | umount DIR | chroot DIR |
 *   unshare-mount DIR | pivot-root DIR | open-by-handle PATH | tiocsti | int80-chmod PATH |
 *   int80-creat PATH | x32-chmod PATH | x32-creat PATH | kill PID SIG | tgkill PID SIG |
 *   pidfd-kill PID SIG | ptrace PID | ptrace-seize PID | procmem PID | vmwrite PID |
 *   pidfd-getfd PID FD | writer-loop GOFILE WSFILE OUTSIDE DONEFILE
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_send_signal
#define __NR_pidfd_send_signal 424
#endif
#ifndef __NR_pidfd_getfd
#define __NR_pidfd_getfd 438
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif

static int result(long r, int err)
{
	if (r >= 0) {
		printf("ok\n");
		return 0;
	}
	const char *n = strerrorname_np(err);
	printf("%s\n", n ? n : "EUNKNOWN");
	return 1;
}

/* A copy of s below 4 GiB, for the i386 ABI (32-bit pointers). */
static char *low_copy(const char *s)
{
	char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT,
		       -1, 0);
	if (p == MAP_FAILED)
		exit(3);
	snprintf(p, 4096, "%s", s);
	return p;
}

#if defined(__x86_64__)
static long int80(long nr, long a, long b)
{
	long ret;
	__asm__ volatile("int $0x80" : "=a"(ret) : "a"(nr), "b"(a), "c"(b) : "memory");
	return ret;
}
#endif

static int raw_result(long r)
{
	if (r < 0 && r > -4096)
		return result(-1, (int)-r);
	return result(r, 0);
}

static int writer_loop(const char *go, const char *wsfile, const char *outside, const char *done)
{
	/* Wait (bounded) for the go file, then try to change things; report each result. */
	struct stat st;
	for (int i = 0; i < 1200 && stat(go, &st) < 0; i++)
		usleep(50000);
	static const struct timeval tv[2] = {{1000000000, 0}, {1000000000, 0}};
	long okc = 0;
	for (int i = 0; i < 20; i++) {
		int fd = (int)syscall(SYS_openat, AT_FDCWD, wsfile, O_WRONLY | O_CREAT, 0644);
		if (fd >= 0) {
			okc++;
			if (write(fd, "after", 5) < 0)
				okc += 0;
			close(fd);
			printf("open-ws ok\n");
		}
		if (syscall(SYS_chmod, outside, 0777) == 0)
			okc++, printf("chmod-outside ok\n");
		if (syscall(SYS_utimes, outside, tv) == 0)
			okc++, printf("utimes-outside ok\n");
		if (syscall(SYS_truncate, outside, 0) == 0)
			okc++, printf("truncate-outside ok\n");
		if (syscall(SYS_setxattr, outside, "user.x", "x", 1, 0) == 0)
			okc++, printf("setxattr-outside ok\n");
		if (syscall(SYS_mkdir, "after-dir", 0755) == 0)
			okc++, printf("mkdir-ws ok\n");
		if (syscall(SYS_unlink, "victim") == 0)
			okc++, printf("unlink-ws ok\n");
		if (syscall(SYS_rename, "victim", "victim2") == 0)
			okc++, printf("rename-ws ok\n");
		if (syscall(SYS_chmod, "victim", 0777) == 0)
			okc++, printf("chmod-ws ok\n");
		int e = errno;
		if (i == 0)
			printf("first errno %s\n", strerrorname_np(e) ? strerrorname_np(e) : "?");
		usleep(20000);
	}
	printf("writer done changes=%ld\n", okc);
	fflush(stdout);
	/* The done file: the scratch dir may be gone and the broker dead; stat-visible only if it
	 * could be created, which itself would be a change. Report on stdout instead. */
	(void)done;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	const char *op = argv[1];
	long r;
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (!strcmp(op, "io_uring")) {
		unsigned char params[120] = {0};
		r = syscall(__NR_io_uring_setup, 8, params);
	} else if (!strcmp(op, "seccomp-listener") || !strcmp(op, "seccomp-tsync-listener")) {
		struct sock_filter f[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
		struct sock_fprog prog = {.len = 1, .filter = f};
		unsigned long fl = SECCOMP_FILTER_FLAG_NEW_LISTENER;
		if (!strcmp(op, "seccomp-tsync-listener"))
			fl |= SECCOMP_FILTER_FLAG_TSYNC | SECCOMP_FILTER_FLAG_TSYNC_ESRCH;
		r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, fl | (1UL << 40), &prog);
		if (r < 0 &&
		    errno == EINVAL) /* the high bit is ignored or refused: try without it */
			r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, fl, &prog);
	} else if (!strcmp(op, "mount") && argc == 3)
		r = mount("tmpfs", argv[2], "tmpfs", 0, NULL);
	else if (!strcmp(op, "umount") && argc == 3)
		r = umount2(argv[2], MNT_DETACH);
	else if (!strcmp(op, "chroot") && argc == 3)
		r = chroot(argv[2]);
	else if (!strcmp(op, "unshare-mount") && argc == 3) {
		r = unshare(CLONE_NEWUSER | CLONE_NEWNS);
		if (r < 0 && getuid() == 0)
			r = unshare(CLONE_NEWNS);
		if (r < 0) {
			printf("unshare:");
			return result(r, errno);
		}
		r = mount("tmpfs", argv[2], "tmpfs", 0, NULL);
		if (r < 0) {
			int e = errno;
			r = mount(argv[2], argv[2], NULL, MS_BIND, NULL);
			if (r < 0)
				errno = e;
		}
	} else if (!strcmp(op, "pivot-root") && argc == 3)
		r = syscall(SYS_pivot_root, argv[2], argv[2]);
	else if (!strcmp(op, "open-by-handle") && argc == 3) {
		struct {
			struct file_handle fh;
			unsigned char h[128];
		} fh = {.fh.handle_bytes = 128};
		int mnt;
		r = name_to_handle_at(AT_FDCWD, argv[2], &fh.fh, &mnt, 0);
		if (r < 0) {
			printf("name_to_handle_at:");
			return result(r, errno);
		}
		r = open_by_handle_at(AT_FDCWD, &fh.fh, O_WRONLY);
	} else if (!strcmp(op, "tiocsti")) {
		char c = '#';
		int fd = open("/dev/tty", O_RDWR | O_NOCTTY);
		r = ioctl(fd >= 0 ? fd : 0, TIOCSTI, &c);
	}
#if defined(__x86_64__)
	else if (!strcmp(op, "int80-chmod") && argc == 3)
		return raw_result(
		    int80(15 /* i386 chmod */, (long)(uintptr_t)low_copy(argv[2]), 0777));
	else if (!strcmp(op, "int80-creat") && argc == 3)
		return raw_result(
		    int80(8 /* i386 creat */, (long)(uintptr_t)low_copy(argv[2]), 0644));
	else if (!strcmp(op, "int80-getpid"))
		return raw_result(int80(20 /* i386 getpid */, 0, 0));
	else if (!strcmp(op, "x32-chmod") && argc == 3)
		r = syscall(0x40000000L | 90 /* x32 chmod */, argv[2], 0777);
	else if (!strcmp(op, "x32-creat") && argc == 3)
		r = syscall(0x40000000L | 85 /* x32 creat */, argv[2], 0644);
	else if (!strcmp(op, "x32-open") && argc == 3)
		r = syscall(0x40000000L | 2 /* x32 open */, argv[2], O_WRONLY | O_TRUNC, 0);
#endif
	else if (!strcmp(op, "kill") && argc == 4)
		r = kill((pid_t)atoi(argv[2]), atoi(argv[3]));
	else if (!strcmp(op, "tgkill") && argc == 4)
		r = syscall(SYS_tgkill, atoi(argv[2]), atoi(argv[2]), atoi(argv[3]));
	else if (!strcmp(op, "pidfd-kill") && argc == 4) {
		int pfd = (int)syscall(__NR_pidfd_open, atoi(argv[2]), 0);
		if (pfd < 0) {
			printf("pidfd_open:");
			return result(pfd, errno);
		}
		r = syscall(__NR_pidfd_send_signal, pfd, atoi(argv[3]), NULL, 0);
	} else if (!strcmp(op, "ptrace") && argc == 3)
		r = ptrace(PTRACE_ATTACH, (pid_t)atoi(argv[2]), NULL, NULL);
	else if (!strcmp(op, "ptrace-seize") && argc == 3)
		r = ptrace(PTRACE_SEIZE, (pid_t)atoi(argv[2]), NULL, NULL);
	else if (!strcmp(op, "procmem") && argc == 3) {
		char p[64];
		snprintf(p, sizeof p, "/proc/%s/mem", argv[2]);
		int fd = open(p, O_RDWR);
		if (fd < 0)
			return result(fd, errno);
		char b = 0;
		r = pwrite(fd, &b, 1, 0x400000);
	} else if (!strcmp(op, "vmwrite") && argc == 3) {
		char b = 0;
		struct iovec l = {&b, 1}, rm = {(void *)0x400000, 1};
		r = process_vm_writev((pid_t)atoi(argv[2]), &l, 1, &rm, 1, 0);
	} else if (!strcmp(op, "pidfd-getfd") && argc == 4) {
		int pfd = (int)syscall(__NR_pidfd_open, atoi(argv[2]), 0);
		if (pfd < 0) {
			printf("pidfd_open:");
			return result(pfd, errno);
		}
		r = syscall(__NR_pidfd_getfd, pfd, atoi(argv[3]), 0);
	} else if (!strcmp(op, "writer-loop") && argc == 6)
		return writer_loop(argv[2], argv[3], argv[4], argv[5]);
	else
		return 2;
	return result(r, errno);
}
