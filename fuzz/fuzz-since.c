/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for parse_since_ns(), the parser of `brokered log --since` (an age or a local
 * date): any bytes; an age never lands after now or before the epoch.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/parse-util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 256)
		return 0;
	char s[257];
	memcpy(s, data, size);
	s[size] = '\0';
	const int64_t now = INT64_C(1764633600) * 1000000000; /* 2025-12-02 */
	int64_t t = -1;
	int r = parse_since_ns(s, now, &t);
	uint64_t age;
	if (r >= 0 && t < 0)
		abort();
	if (parse_duration_sec(s, &age) >= 0 && (r < 0 || t > now))
		abort();
	return 0;
}
