/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdlib.h>

/*
 * Room for one more element in a growing array: *v holds n of *cap, each size bytes. Full, it
 * doubles (from min). 0, or -ENOMEM with *v and *cap as they were.
 */
static inline int array_grow(void **v, size_t *cap, size_t n, size_t size, size_t min)
{
	if (n < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : min;
	void *p = ncap > *cap ? reallocarray(*v, ncap, size) : NULL;
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = ncap;
	return 0;
}

/* ARRAY_GROW(v, cap, n, min) for an array v of any element type. */
#define ARRAY_GROW(v, cap, n, min) array_grow((void **)&(v), &(cap), (n), sizeof *(v), (min))
