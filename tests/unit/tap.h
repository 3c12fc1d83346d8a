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
			printf("#   failed at %s:%d\n", __FILE__, __LINE__);                       \
		_c;                                                                                \
	})

#define is_str(got, want, ...)                                                                     \
	({                                                                                         \
		const char *_gs = (got), *_ws = (want);                                            \
		int _cs = ok(_gs && _ws && strcmp(_gs, _ws) == 0, __VA_ARGS__);                    \
		if (!_cs)                                                                          \
			printf("#   got:  '%s'\n#   want: '%s'\n", _gs ? _gs : "(null)",           \
			       _ws ? _ws : "(null)");                                              \
		_cs;                                                                               \
	})

#define is_int(got, want, ...)                                                                     \
	({                                                                                         \
		long long _gi = (got), _wi = (want);                                               \
		int _ci = ok(_gi == _wi, __VA_ARGS__);                                             \
		if (!_ci)                                                                          \
			printf("#   got:  %lld\n#   want: %lld\n", _gi, _wi);                      \
		_ci;                                                                               \
	})

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
