/* SPDX-License-Identifier: MIT */
/*
 * Audit log (DESIGN section 8): one key=value line per decision, buffered so that the hot path does
 * not pay a write(2) per line. Values are escaped with escape_append(), so a line is always one
 * line.
 */
#pragma once

#include <stdint.h>

#include "basic/strbuf.h"

struct audit;

int audit_open(const char *path, const char *session, const char *tool_call, struct audit **ret);
/* Flush and close; NULL is fine. */
void audit_close(struct audit *a);
int audit_flush(struct audit *a);

struct audit_record {
	const char *phase;	   /* notify-open, notify-op, host-modify-backup, ... */
	const char *op;		   /* open, unlink, rename, ... */
	const char *path;	   /* as requested (may be relative) */
	const char *normalised;	   /* real absolute path acted on */
	const char *to;		   /* second path of rename/link, as requested */
	const char *normalised_to; /* its real path */
	const char *decision;	   /* allow, deny, sandbox, continue, ... */
	const char *result;	   /* ok, or an errno name */
	const char *extra;	   /* optional preformatted "k=v k=v" */
	int pid;
	uint64_t us; /* time the broker spent */
};

void audit_log(struct audit *a, const struct audit_record *rec);
