/* SPDX-License-Identifier: MIT */
/* Minimal TAP producer for unit tests: ok(cond, fmt, ...), then return tap_done(). */
#pragma once

#include <stdio.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                              \
	({                                                                                         \
		int _c = !!(cond);                                                                 \
		tap_n++;                                                                           \
		if (!_c)                                                                           \
			tap_failed++;                                                              \
		printf("%sok %d - ", _c ? "" : "not ", tap_n);                                     \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!_c)                                                                           \
			printf("#   failed at %s:%d\n", __FILE__, __LINE__);                           \
		_c;                                                                                \
	})

#define is_str(got, want, ...)                                                                     \
	({                                                                                         \
		const char *_g = (got), *_w = (want);                                              \
		int _c = ok(_g && _w && strcmp(_g, _w) == 0, __VA_ARGS__);                        \
		if (!_c)                                                                           \
			printf("#   got:  '%s'\n#   want: '%s'\n", _g ? _g : "(null)",              \
			       _w ? _w : "(null)");                                                  \
		_c;                                                                                \
	})

#define is_int(got, want, ...)                                                                     \
	({                                                                                         \
		long long _g = (got), _w = (want);                                                 \
		int _c = ok(_g == _w, __VA_ARGS__);                                                \
		if (!_c)                                                                           \
			printf("#   got:  %lld\n#   want: %lld\n", _g, _w);                          \
		_c;                                                                                \
	})

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
