/* SPDX-License-Identifier: MIT */
/* File-system helpers (systemd's fs-util.h in spirit). */
#pragma once

#include <dirent.h>
#include <stddef.h>
#include <sys/stat.h>

/*
 * Open path read-only as a regular file: O_NONBLOCK and O_NOCTTY, so that a FIFO or a terminal
 * put in its place can neither block nor become our terminal. Returns the fd (O_CLOEXEC), -errno,
 * or -EINVAL when it is no regular file. ret_st, if not NULL, gets its fstat.
 */
int open_regular(const char *path, struct stat *ret_st);

/* fdopendir() that takes fd: on failure fd is closed and errno says why. */
DIR *xfdopendir(int fd);
/* The directory name below dirfd (not followed if a symlink), for readdir(); NULL with errno. */
DIR *opendir_at(int dirfd, const char *name);

/*
 * Remove name below dirfd and, if it is a directory, everything in it (symlinks are removed, never
 * followed). Goes on past entries it cannot remove and returns the first error (-ELOOP beyond 256
 * levels), or 0.
 */
int rm_rf_at(int dirfd, const char *name);
/* The same, making each directory below writable and searchable for us first (an overlay's work
 * dir made in a user namespace holds some of mode 0; a command may leave read-only ones). */
int rm_rf_at_force(int dirfd, const char *name);

/* Is the directory name below dirfd (not followed if a symlink) empty? 1, 0, or -errno. */
int dir_is_empty_at(int dirfd, const char *name);

/* Write all n bytes (a short write goes on, EINTR is retried). 0, or -errno (-EIO if nothing could
 * be written). */
int loop_write(int fd, const void *data, size_t n);

/*
 * Copy the rest of src to dst, from their current offsets: copy_file_range, or read and write
 * where the kernel cannot copy between them (other file systems, special files). 0 or -errno.
 */
int copy_bytes(int src, int dst);

/* Do a and b hold the same bytes from their current offsets to their ends? 1, 0, or -errno. */
int fd_equal_contents(int a, int b);
