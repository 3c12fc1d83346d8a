/* SPDX-License-Identifier: MIT */
#include "audit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/escape.h"
#include "basic/macro.h"

/* Flush when this much is buffered; the supervisor also flushes when it goes idle. */
#define AUDIT_FLUSH_BYTES (64 * 1024)

struct audit {
	int fd;
	char *session;
	char *tool_call;
	struct strbuf buf;
	time_t cached_sec;
	char cached_ts[32];
};

int audit_open(const char *path, const char *session, const char *tool_call, struct audit **ret)
{
	struct audit *a = calloc(1, sizeof *a);
	if (!a)
		return -ENOMEM;
	a->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (a->fd < 0) {
		int r = negative_errno();
		free(a);
		return r;
	}
	a->session = strdup(session ? session : "-");
	a->tool_call = strdup(tool_call ? tool_call : "-");
	if (!a->session || !a->tool_call) {
		audit_close(a);
		return -ENOMEM;
	}
	*ret = a;
	return 0;
}

int audit_flush(struct audit *a)
{
	if (!a || a->buf.len == 0)
		return 0;
	size_t off = 0;
	while (off < a->buf.len) {
		ssize_t n = RETRY_EINTR(write(a->fd, a->buf.buf + off, a->buf.len - off));
		if (n < 0) {
			int r = negative_errno();
			strbuf_reset(&a->buf);
			return r;
		}
		off += (size_t)n;
	}
	strbuf_reset(&a->buf);
	return 0;
}

void audit_close(struct audit *a)
{
	if (!a)
		return;
	(void)audit_flush(a);
	safe_close(a->fd);
	strbuf_free(&a->buf);
	free(a->session);
	free(a->tool_call);
	free(a);
}

static void kv(struct strbuf *sb, const char *k, const char *v)
{
	if (!v)
		return;
	strbuf_appendc(sb, ' ');
	strbuf_appends(sb, k);
	strbuf_appendc(sb, '=');
	if (*v)
		escape_appends(sb, v);
	else
		strbuf_appends(sb, "\"\"");
}

void audit_log(struct audit *a, const struct audit_record *rec)
{
	if (!a)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != a->cached_sec) {
		struct tm tm;
		gmtime_r(&ts.tv_sec, &tm);
		strftime(a->cached_ts, sizeof a->cached_ts, "%Y-%m-%dT%H:%M:%S", &tm);
		a->cached_sec = ts.tv_sec;
	}
	struct strbuf *sb = &a->buf;
	strbuf_appends(sb, "ts=");
	strbuf_appends(sb, a->cached_ts);
	strbuf_appendc(sb, '.');
	strbuf_append_u64(sb, (uint64_t)ts.tv_nsec / 1000, 10, 6);
	strbuf_appendc(sb, 'Z');
	kv(sb, "phase", rec->phase);
	kv(sb, "session", a->session);
	kv(sb, "toolCall", a->tool_call);
	if (rec->pid) {
		strbuf_appends(sb, " pid=");
		strbuf_append_i64(sb, rec->pid);
	}
	kv(sb, "op", rec->op);
	kv(sb, "path", rec->path);
	kv(sb, "normalisedPath", rec->normalised);
	kv(sb, "to", rec->to);
	kv(sb, "normalisedTo", rec->normalised_to);
	kv(sb, "decision", rec->decision);
	kv(sb, "result", rec->result);
	if (rec->extra && *rec->extra) {
		strbuf_appendc(sb, ' ');
		strbuf_appends(sb, rec->extra);
	}
	strbuf_appends(sb, " us=");
	strbuf_append_u64(sb, rec->us, 10, 0);
	strbuf_appendc(sb, '\n');
	if (sb->oom) {
		/* Out of memory: drop what is buffered rather than write a torn line. */
		strbuf_free(sb);
		return;
	}
	if (sb->len >= AUDIT_FLUSH_BYTES)
		(void)audit_flush(a);
}
