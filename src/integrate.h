/* SPDX-License-Identifier: MIT */
/*
 * The settings merge of `brokered integrate` (integrate.c): pure, so that the fuzz target and the
 * command share it. Never logs.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "basic/strbuf.h"

struct integrate_result {
	unsigned found;	    /* bit per hook entry: present, naming this binary */
	unsigned ours;	    /* hooks of brokered's found (any binary) */
	unsigned n_entries; /* the agent's entries: found == (1 << n_entries) - 1 is complete */
};

/*
 * Read an agent's settings file (buf[0..n), empty or blank: none yet) and write to out the file
 * with brokered's hook entries (naming the binary self) added (install) or removed, every other
 * member kept in its order. -EINVAL with *ret_error (malloc'd, "LINE:COL: reason" or " reason")
 * when the file does not parse or has another shape than the agent's; -ENOMEM.
 */
int integrate_merge(const char *agent, const char *self, bool install, const char *buf, size_t n,
		    struct strbuf *out, struct integrate_result *ret, char **ret_error);
