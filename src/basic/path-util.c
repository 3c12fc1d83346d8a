/* SPDX-License-Identifier: MIT */
#include "path-util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int path_normalise(const char *path, struct strbuf *out)
{
	if (!path || path[0] != '/')
		return -EINVAL;
	strbuf_reset(out);
	int r = strbuf_appendc(out, '/');
	if (r < 0)
		return r;
	const char *p = path;
	while (*p) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		const char *e = strchrnul(p, '/');
		size_t n = (size_t)(e - p);
		if (n == 1 && p[0] == '.') {
			/* nothing */
		} else if (n == 2 && p[0] == '.' && p[1] == '.') {
			if (out->len > 1) {
				char *slash = memrchr(out->buf, '/', out->len);
				out->len = slash == out->buf ? 1 : (size_t)(slash - out->buf);
				out->buf[out->len] = '\0';
			}
		} else {
			if (out->len > 1 && (r = strbuf_appendc(out, '/')) < 0)
				return r;
			if ((r = strbuf_append(out, p, n)) < 0)
				return r;
		}
		p = e;
	}
	return 0;
}

int path_join(const char *base, const char *rel, struct strbuf *out)
{
	strbuf_reset(out);
	if (rel[0] == '/')
		return strbuf_appends(out, rel);
	int r = strbuf_appends(out, base);
	if (r < 0)
		return r;
	if (out->len == 0 || out->buf[out->len - 1] != '/')
		if ((r = strbuf_appendc(out, '/')) < 0)
			return r;
	return strbuf_appends(out, rel);
}

bool path_is_under(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);
	if (n == 1 && prefix[0] == '/')
		return path[0] == '/';
	if (strncmp(path, prefix, n) != 0)
		return false;
	return path[n] == '\0' || path[n] == '/';
}

int path_split(const char *path, char **ret_parent, const char **ret_name)
{
	const char *slash = strrchr(path, '/');
	if (!slash || slash[1] == '\0')
		return -EINVAL;
	size_t n = slash == path ? 1 : (size_t)(slash - path);
	char *parent = strndup(path, n);
	if (!parent)
		return -ENOMEM;
	*ret_parent = parent;
	*ret_name = slash + 1;
	return 0;
}

int path_home_to_tilde(const char *path, const char *home, struct strbuf *out)
{
	strbuf_reset(out);
	if (home && home[0] == '/' && strcmp(home, "/") != 0 && path_is_under(path, home)) {
		int r = strbuf_appendc(out, '~');
		if (r < 0)
			return r;
		return strbuf_appends(out, path + strlen(home));
	}
	return strbuf_appends(out, path);
}

bool path_component_valid(const char *name)
{
	if (!name || !*name || strchr(name, '/'))
		return false;
	return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}
