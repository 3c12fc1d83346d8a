/* SPDX-License-Identifier: MIT */
/* Checked number parsing: the whole string must be a number in range. */
#pragma once

#include <stdint.h>

int parse_u64(const char *s, int base, uint64_t *ret);
int parse_i64(const char *s, int base, int64_t *ret);
int parse_int_range(const char *s, int min, int max, int *ret);
/* Octal file mode, at most 07777. */
int parse_mode(const char *s, unsigned *ret);
/* Durations like "30s", "15m", "12h", "7d", "2w"; a bare number is seconds. */
int parse_duration_sec(const char *s, uint64_t *ret);
/* A point in time for `log --since`: an age ("2h", "3d": that long before now_ns, not before
 * 0) or a local date "YYYY-MM-DD[( |T)HH:MM[:SS]]". Nanoseconds since the epoch. */
int parse_since_ns(const char *s, int64_t now_ns, int64_t *ret);
