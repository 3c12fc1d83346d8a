/* SPDX-License-Identifier: MIT */
#include "approval.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/escape.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "broker.h"
#include "net.h"
#include "policy.h"

#define GRANTS_FILE	 "grants"
#define GRANTS_MAX_BYTES (1024 * 1024)

void approval_access_names(unsigned access, char *buf, size_t n)
{
	static const struct {
		unsigned bit;
		const char *name;
	} names[] = {{POLICY_ACCESS_READ, "read"},
		     {POLICY_ACCESS_WRITE, "write"},
		     {POLICY_ACCESS_DELETE, "delete"},
		     {POLICY_ACCESS_METADATA, "metadata"}};
	size_t off = 0;
	buf[0] = '\0';
	if (access == 0) {
		snprintf(buf, n, "connect");
		return;
	}
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (access & names[i].bit) {
			int k = snprintf(buf + off, n - off, "%s%s", off ? "," : "", names[i].name);
			if (k < 0 || (size_t)k >= n - off)
				return;
			off += (size_t)k;
		}
}

int approval_parse_grant(const char *arg, char **ret_path, unsigned *ret_access)
{
	const char *eq = strrchr(arg, '=');
	unsigned access = POLICY_ACCESS_MODIFY;
	size_t plen = strlen(arg);
	if (eq) {
		access = 0;
		plen = (size_t)(eq - arg);
		_cleanup_free_ char *list = strdup(eq + 1);
		if (!list)
			return -ENOMEM;
		char *save = NULL;
		for (char *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
			unsigned a;
			if (policy_access_from_string(t, &a) < 0)
				return -EINVAL;
			access |= a;
		}
		if (!access)
			return -EINVAL;
	}
	if (plen == 0 || plen >= BROKERED_PATH_MAX)
		return -EINVAL;
	_cleanup_free_ char *raw = strndup(arg, plen);
	if (!raw)
		return -ENOMEM;
	/* Grants name real paths: resolve what exists, keep the rest lexical. */
	char *real = realpath(raw, NULL);
	if (!real) {
		struct strbuf sb = STRBUF_INIT, abs = STRBUF_INIT;
		char cwd[BROKERED_PATH_MAX];
		if (raw[0] != '/' && !getcwd(cwd, sizeof cwd))
			return -errno;
		int r = path_join(raw[0] == '/' ? "/" : cwd, raw, &abs);
		if (r >= 0)
			r = path_normalise(abs.buf, &sb);
		strbuf_free(&abs);
		if (r < 0) {
			strbuf_free(&sb);
			return r;
		}
		real = strbuf_steal(&sb);
		if (!real)
			return -ENOMEM;
	}
	*ret_path = real;
	*ret_access = access;
	return 0;
}

static int grants_path(const char *session_dir, struct strbuf *sb)
{
	return strbuf_printf(sb, "%s/%s", session_dir, GRANTS_FILE);
}

int approval_load_session(const char *session_dir, struct policy *p, struct net *net)
{
	_cleanup_strbuf_ struct strbuf path = STRBUF_INIT;
	int r = grants_path(session_dir, &path);
	if (r < 0)
		return r;
	FILE *f = fopen(path.buf, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	size_t total = 0;
	int added = 0;
	/* Format: "<access-mask-hex> <escaped-path>\n"; bad lines are skipped. */
	while ((n = getline(&line, &cap, f)) > 0 && total < GRANTS_MAX_BYTES) {
		total += (size_t)n;
		if (line[n - 1] == '\n')
			line[--n] = '\0';
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		char *end;
		unsigned long access = strtoul(line, &end, 16);
		if (*end || access > POLICY_ACCESS_ALL)
			continue;
		struct strbuf dec = STRBUF_INIT;
		if (unescape_append(&dec, sp + 1, strlen(sp + 1)) == 0 && dec.len &&
		    (access
			 ? dec.buf[0] == '/' && policy_add_grant(p, dec.buf, (unsigned)access) == 0
			 : net_is_grant(dec.buf) && net_add_grant(net, dec.buf) == 0))
			added++;
		strbuf_free(&dec);
	}
	free(line);
	fclose(f);
	return added;
}

int approval_save_session(const char *session_dir, const struct broker_prompt *v, size_t n)
{
	_cleanup_strbuf_ struct strbuf path = STRBUF_INIT, out = STRBUF_INIT;
	int r = grants_path(session_dir, &path);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n; i++) {
		strbuf_printf(&out, "%x ", v[i].access);
		escape_appends(&out, v[i].path);
		strbuf_appendc(&out, '\n');
	}
	if (out.oom)
		return -ENOMEM;
	_cleanup_close_ int fd =
	    open(path.buf, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, out.buf, out.len) != (ssize_t)out.len)
		return -EIO;
	return fsync(fd) < 0 ? -errno : 0;
}

bool approval_interactive(void)
{
	if (!isatty(STDIN_FILENO) || !isatty(STDERR_FILENO))
		return false;
	int fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

enum approval_answer approval_ask(const struct broker_prompt *v, size_t n)
{
	FILE *tty = fopen("/dev/tty", "r+e");
	if (!tty)
		return APPROVAL_DENY;
	fprintf(tty,
		"\nbrokered: the command was refused %zu access%s that need%s your approval:\n", n,
		n == 1 ? "" : "es", n == 1 ? "s" : "");
	for (size_t i = 0; i < n; i++) {
		char acc[64];
		approval_access_names(v[i].access, acc, sizeof acc);
		struct strbuf p = STRBUF_INIT;
		escape_appends(&p, v[i].path);
		fprintf(tty, "  %-16s %s   (%s, by %s)\n", acc, strbuf_cstr(&p) ? p.buf : "?",
			v[i].rule, v[i].op);
		strbuf_free(&p);
	}
	fprintf(tty,
		"Undo this attempt and run the command again with %s allowed?\n"
		"  [o] allow once   [s] allow for this session   [d] deny (default): ",
		n == 1 ? "it" : "them");
	fflush(tty);
	char answer[32] = "";
	enum approval_answer a = APPROVAL_DENY;
	if (fgets(answer, sizeof answer, tty)) {
		if (answer[0] == 'o' || answer[0] == 'O' || answer[0] == 'y' || answer[0] == 'Y')
			a = APPROVAL_ONCE;
		else if (answer[0] == 's' || answer[0] == 'S')
			a = APPROVAL_SESSION;
	}
	fclose(tty);
	return a;
}
