/* SPDX-License-Identifier: MIT */
/* Small language helpers: cleanup attributes and ownership transfer (systemd style). */
#pragma once

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f)   __attribute__((cleanup(f)))
#define _unused_       __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _noreturn_     __attribute__((noreturn))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b)     ((a) < (b) ? (a) : (b))
#define MAX(a, b)     ((a) > (b) ? (a) : (b))

/* Take ownership of a value out of a variable that has a cleanup attribute. */
#define TAKE_GENERIC(var, null)                                                                    \
	({                                                                                         \
		__typeof__(var) _t = (var);                                                        \
		(var) = (null);                                                                    \
		_t;                                                                                \
	})
#define TAKE_FD(fd) TAKE_GENERIC(fd, -1)
#define TAKE_PTR(p) TAKE_GENERIC(p, NULL)

static inline int safe_close(int fd)
{
	if (fd >= 0) {
		int saved = errno;
		(void)close(fd);
		errno = saved;
	}
	return -1;
}

static inline void closep(int *fd)
{
	*fd = safe_close(*fd);
}

static inline void freep(void *p)
{
	free(*(void **)p);
}

#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_free_	_cleanup_(freep)

/* -errno of the last failing libc call; never 0, so a caller cannot mistake it for success. */
#define negative_errno()                                                                           \
	({                                                                                         \
		int _e = errno > 0 ? -errno : -EIO;                                                \
		assert(_e < 0);                                                                    \
		_e;                                                                                \
	})

/* Retry a libc call interrupted by a signal. */
#define RETRY_EINTR(expr)                                                                          \
	({                                                                                         \
		__typeof__(expr) _r;                                                               \
		do                                                                                 \
			_r = (expr);                                                               \
		while (_r < 0 && errno == EINTR);                                                  \
		_r;                                                                                \
	})
