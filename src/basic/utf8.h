/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (1 for ASCII, 2..4), or 0 if it is not one
 * (overlong, surrogate, beyond U+10FFFF, truncated). n > 0. */
size_t utf8_seq_len(const unsigned char *s, size_t n);
