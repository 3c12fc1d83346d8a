/* SPDX-License-Identifier: MIT */
#include "parse-util.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int parse_u64(const char *s, int base, uint64_t *ret)
{
	if (!s || !*s || isspace((unsigned char)*s) || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, base);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_i64(const char *s, int base, int64_t *ret)
{
	if (!s || !*s || isspace((unsigned char)*s) || *s == '+')
		return -EINVAL;
	errno = 0;
	char *end;
	long long v = strtoll(s, &end, base);
	if (errno == ERANGE)
		return -ERANGE;
	if (errno || *end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_int_range(const char *s, int min, int max, int *ret)
{
	int64_t v;
	int r = parse_i64(s, 10, &v);
	if (r < 0)
		return r;
	if (v < min || v > max)
		return -ERANGE;
	*ret = (int)v;
	return 0;
}

int parse_mode(const char *s, unsigned *ret)
{
	uint64_t v;
	int r = parse_u64(s, 8, &v);
	if (r < 0)
		return r;
	if (v > 07777)
		return -ERANGE;
	*ret = (unsigned)v;
	return 0;
}

int parse_duration_sec(const char *s, uint64_t *ret)
{
	if (!s || !*s)
		return -EINVAL;
	size_t n = strlen(s);
	uint64_t mult = 1;
	char unit = s[n - 1];
	if (!isdigit((unsigned char)unit)) {
		switch (unit) {
		case 's':
			mult = 1;
			break;
		case 'm':
			mult = 60;
			break;
		case 'h':
			mult = 3600;
			break;
		case 'd':
			mult = 86400;
			break;
		case 'w':
			mult = 7 * 86400;
			break;
		default:
			return -EINVAL;
		}
		n--;
	}
	if (n == 0 || n > 20)
		return -EINVAL;
	char num[21];
	memcpy(num, s, n);
	num[n] = '\0';
	uint64_t v;
	int r = parse_u64(num, 10, &v);
	if (r < 0)
		return r;
	if (v > UINT64_MAX / mult)
		return -ERANGE;
	*ret = v * mult;
	return 0;
}

int parse_since_ns(const char *s, int64_t now_ns, int64_t *ret)
{
	uint64_t age;
	if (parse_duration_sec(s, &age) >= 0) {
		int64_t now = now_ns > 0 ? now_ns / 1000000000 : 0;
		*ret = (age >= (uint64_t)now ? 0 : now - (int64_t)age) * 1000000000;
		return 0;
	}
	static const char *const formats[] = {"%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S",
					      "%Y-%m-%d %H:%M", "%Y-%m-%dT%H:%M", "%Y-%m-%d"};
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
		struct tm tm = {.tm_isdst = -1};
		const char *end = strptime(s, formats[i], &tm);
		if (!end || *end)
			continue;
		time_t t = mktime(&tm);
		if (t == (time_t)-1 || t < 0 || t > INT64_MAX / 1000000000)
			return -ERANGE;
		*ret = (int64_t)t * 1000000000;
		return 0;
	}
	return -EINVAL;
}
