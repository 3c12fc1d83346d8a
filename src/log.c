/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum log_level max_level = LOG_LEVEL_INFO;

void log_set_level(enum log_level level)
{
	max_level = level;
}

enum log_level log_get_level(void)
{
	return max_level;
}

void log_setup_from_env(void)
{
	const char *d = getenv("BROKERED_DEBUG");
	if (d && *d && strcmp(d, "0") != 0)
		max_level = LOG_LEVEL_DEBUG;
	const char *q = getenv("BROKERED_QUIET");
	if (q && *q && strcmp(q, "0") != 0)
		max_level = LOG_LEVEL_WARNING;
}

int log_internal(enum log_level level, int error, const char *fmt, ...)
{
	int e = error < 0 ? -error : error;
	if (level <= max_level) {
		char buf[4096];
		va_list ap;
		va_start(ap, fmt);
		errno = e; /* so that %m prints the error passed in */
		vsnprintf(buf, sizeof buf, fmt, ap);
		va_end(ap);
		fprintf(stderr, "brokered: %s%s\n", level == LOG_LEVEL_WARNING ? "warning: " : "",
			buf);
	}
	return error > 0 ? -error : (error < 0 ? error : -EIO);
}
