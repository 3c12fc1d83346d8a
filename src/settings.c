/* SPDX-License-Identifier: MIT */
#include "settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/json-write.h"
#include "basic/json.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "basic/string-table.h"

#define SETTINGS_STRING_MAX BROKERED_PATH_MAX

/* Scalars a file may set once; present bits. */
enum {
	SET_SANDBOX_ENABLED = 1u << 0,
	SET_BACKUP_ENABLED = 1u << 1,
	SET_MAX_SIZE = 1u << 2,
	SET_DENY_OVERSIZE = 1u << 3,
	SET_DELETE_MODE = 1u << 4,
	SET_SYNC = 1u << 5,
	SET_ALLOW_SETID = 1u << 6,
	SET_GIT_HOOKS = 1u << 7,
	SET_GIT_EXEC_CONFIG = 1u << 8,
	SET_NET_MODE = 1u << 9,
	SET_NET_LOCALHOST = 1u << 10,
	SET_READ_ONLY_MOUNTS = 1u << 11,
	SET_COPY_ON_WRITE = 1u << 12,
};

/* One file being loaded: its values go into a scratch struct settings, merged on success. */
struct loader {
	const char *name;
	struct settings *s;
	unsigned seen;	  /* set in this file: a second time is an error */
	unsigned present; /* set to a valid value: merged */
	struct settings_error *err;
};

void settings_error_done(struct settings_error *e)
{
	if (!e)
		return;
	free(e->message);
	e->message = NULL;
}

static void free_strv(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

static void settings_clear(struct settings *s)
{
	free_strv(s->excluded_commands, s->n_excluded_commands);
	free_strv(s->net_allowed_domains, s->n_net_allowed_domains);
	free_strv(s->net_denied_domains, s->n_net_denied_domains);
	free_strv(s->net_unix_sockets, s->n_net_unix_sockets);
	for (size_t i = 0; i < s->n_rules; i++)
		free(s->rules[i].pattern);
	free(s->rules);
	free_strv(s->warnings, s->n_warnings);
}

void settings_free(struct settings *s)
{
	if (!s)
		return;
	settings_clear(s);
	free(s);
}

static void settings_defaults(struct settings *s)
{
	*s = (struct settings){
	    .sandbox_enabled = true,
	    .backup_enabled = true,
	    .backup_sync = true,
	    .backup_max_size_mb = SETTINGS_MAX_SIZE_MB_DEFAULT,
	};
}

int settings_new(struct settings **ret)
{
	struct settings *s = malloc(sizeof(*s));
	if (!s)
		return -ENOMEM;
	settings_defaults(s);
	*ret = s;
	return 0;
}

/* ---- messages ---- */

static int set_message(struct settings_error *err, struct strbuf *sb)
{
	if (!err)
		return 0;
	char *m = strbuf_steal(sb);
	if (!m)
		return -ENOMEM;
	free(err->message);
	err->message = m;
	return 0;
}

/* err->message = "NAME: " fmt ... */
_printf_(2, 3) static void set_errorf(struct loader *l, const char *fmt, ...)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	va_list ap;
	strbuf_printf(&sb, "%s: ", l->name);
	va_start(ap, fmt);
	strbuf_vprintf(&sb, fmt, ap);
	va_end(ap);
	(void)set_message(l->err, &sb);
}

/* The same, and returns r: a macro, so that the caller's code shows the error it returns (the
 * analyzer does not follow a call with variable arguments). */
#define errorf(l, r, ...) (set_errorf((l), __VA_ARGS__), (r))

static int type_error(struct loader *l, const char *key, const char *want,
		      const struct json_value *v)
{
	return errorf(l, -EINVAL, "%s: expected %s, got %s", key, want,
		      json_type_name(json_type(v)));
}

static int push_str(char ***v, size_t *n, char *s)
{
	char **m = reallocarray(*v, *n + 1, sizeof(char *));
	if (!m) {
		free(s);
		return -ENOMEM;
	}
	m[(*n)++] = s;
	*v = m;
	return 0;
}

/* A warning "NAME: what \"KEY\"", the key quoted so that odd bytes stay visible. */
static int warn_key(struct loader *l, const char *what, const char *key)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s: %s ", l->name, what);
	json_append_string(&sb, key, strlen(key));
	char *m = strbuf_steal(&sb);
	if (!m)
		return -ENOMEM;
	return push_str(&l->s->warnings, &l->s->n_warnings, m);
}

/* ---- values ---- */

/* "KEY" + suffix in k; "" after an allocation failure (the caller's next step reports it). */
_printf_(3, 4) static const char *subkey(struct strbuf *k, const char *key, const char *fmt, ...)
{
	va_list ap;
	strbuf_reset(k);
	strbuf_appends(k, key);
	va_start(ap, fmt);
	strbuf_vprintf(k, fmt, ap);
	va_end(ap);
	return strbuf_cstr(k) ?: "";
}

static int get_string(struct loader *l, const char *key, const struct json_value *v, char **ret)
{
	size_t len;
	const char *s = json_get_string(v, &len);
	if (!s)
		return type_error(l, key, "string", v);
	if (len == 0)
		return errorf(l, -EINVAL, "%s: empty string", key);
	if (len > SETTINGS_STRING_MAX)
		return errorf(l, -EINVAL, "%s: longer than %d bytes", key, SETTINGS_STRING_MAX);
	char *d = strdup(s);
	if (!d)
		return -ENOMEM;
	*ret = d;
	return 0;
}

static int mark_set(struct loader *l, const char *key, unsigned bit)
{
	if (l->seen & bit)
		return errorf(l, -EINVAL, "%s: set more than once", key);
	l->seen |= bit;
	l->present |= bit;
	return 0;
}

static int apply_bool(struct loader *l, const char *key, const struct json_value *v, unsigned bit,
		      bool *field)
{
	bool b;
	if (json_get_bool(v, &b) < 0)
		return type_error(l, key, "boolean", v);
	int r = mark_set(l, key, bit);
	if (r < 0)
		return r;
	*field = b;
	return 0;
}

/* "unlink" (default) or "trash": what an intercepted delete does (the store keeps it either way).
 */
static int apply_delete_mode(struct loader *l, const char *key, const struct json_value *v)
{
	size_t n;
	const char *m = json_get_string(v, &n);
	if (!m)
		return type_error(l, key, "\"unlink\" or \"trash\"", v);
	bool trash;
	if (n == 6 && memcmp(m, "unlink", 6) == 0)
		trash = false;
	else if (n == 5 && memcmp(m, "trash", 5) == 0)
		trash = true;
	else
		return type_error(l, key, "\"unlink\" or \"trash\"", v);
	int r = mark_set(l, key, SET_DELETE_MODE);
	if (r < 0)
		return r;
	l->s->delete_to_trash = trash;
	return 0;
}

static uint64_t clamp_mb(double d)
{
	if (!(d >= SETTINGS_MAX_SIZE_MB_MIN))
		return SETTINGS_MAX_SIZE_MB_MIN;
	if (d >= SETTINGS_MAX_SIZE_MB_MAX)
		return SETTINGS_MAX_SIZE_MB_MAX;
	return (uint64_t)d; /* rounds down */
}

static int apply_max_size(struct loader *l, const char *key, const struct json_value *v)
{
	double d;
	int r = mark_set(l, "sandbox.fileBackup.maxSizeMB", SET_MAX_SIZE);
	if (r < 0)
		return r;
	if (json_get_double(v, &d) < 0) {
		/* not a number: as if absent (the earlier file's value, else the default) */
		l->present &= ~(unsigned)SET_MAX_SIZE;
		return warn_key(l, "not a number, ignored:", key);
	}
	l->s->backup_max_size_mb = clamp_mb(d);
	return 0;
}

static int check_pattern(struct loader *l, const char *key, const char *p)
{
	if (p[0] == '~' && p[1] != '\0' && p[1] != '/')
		return errorf(l, -EINVAL, "%s: \"~user\" patterns are not supported", key);
	return 0;
}

/* ---- sandbox.network ---- */

static int apply_net_mode(struct loader *l, const char *key, const struct json_value *v)
{
	static const char *const names[] = {[SETTINGS_NET_ALLOW] = "allow",
					    [SETTINGS_NET_DENY] = "deny",
					    [SETTINGS_NET_PROXY] = "proxy"};
	size_t n;
	const char *m = json_get_string(v, &n);
	/* a NUL inside the JSON string names no mode */
	ssize_t i = m && strlen(m) == n
			? string_table_lookup_from_string(names, ELEMENTSOF(names), m)
			: -EINVAL;
	if (i < 0)
		return type_error(l, key, "\"allow\", \"deny\" or \"proxy\"", v);
	int r = mark_set(l, key, SET_NET_MODE);
	if (r < 0)
		return r;
	l->s->net_mode = (enum settings_net_mode)i;
	return 0;
}

/* A host name pattern: letters, digits, '-', '_', '.', ':' (IPv6 literals), a leading "*.". */
static bool domain_pattern_ok(const char *d)
{
	const char *p = d;
	if (p[0] == '*' && p[1] == '.')
		p += 2;
	if (!*p || strlen(d) > 253)
		return false;
	for (; *p; p++)
		if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
		      ('0' <= *p && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == ':'))
			return false;
	return true;
}

enum string_kind {
	STRING_PLAIN,	/* excludedCommands */
	STRING_DOMAIN,	/* checked as a host name pattern */
	STRING_PATTERN, /* checked as a path pattern */
};

/* An array of strings, appended to list. */
static int apply_strings(struct loader *l, const char *key, const struct json_value *v,
			 enum string_kind kind, char ***list, size_t *n)
{
	if (json_type(v) != JSON_ARRAY)
		return type_error(l, key, "array of strings", v);
	for (size_t i = 0; i < json_array_len(v); i++) {
		_cleanup_strbuf_ struct strbuf k = STRBUF_INIT;
		const char *sk = subkey(&k, key, "[%zu]", i);
		char *s = NULL;
		int r = get_string(l, sk, json_array_get(v, i), &s);
		if (r < 0)
			return r;
		if (kind == STRING_DOMAIN && !domain_pattern_ok(s)) {
			free(s);
			return errorf(
			    l, -EINVAL,
			    "%s: not a host name (letters, digits, '-', '.', a leading \"*.\")",
			    sk);
		}
		if (kind == STRING_PATTERN && (r = check_pattern(l, sk, s)) < 0) {
			free(s);
			return r;
		}
		if ((r = push_str(list, n, s)) < 0)
			return r;
	}
	return 0;
}

static int push_rule(struct loader *l, char *pattern, unsigned access, enum policy_decision d,
		     const char *source)
{
	struct settings *s = l->s;
	struct settings_rule *m = reallocarray(s->rules, s->n_rules + 1, sizeof(*m));
	if (!m) {
		free(pattern);
		return -ENOMEM;
	}
	m[s->n_rules++] = (struct settings_rule){pattern, access, d, source};
	s->rules = m;
	return 0;
}

/* allowlist / blocklist: arrays of patterns */
static int apply_list(struct loader *l, const char *key, const struct json_value *v,
		      unsigned access, enum policy_decision d, const char *source)
{
	char **p = NULL;
	size_t n = 0, i = 0;
	int r = apply_strings(l, key, v, STRING_PATTERN, &p, &n);
	for (; r >= 0 && i < n; i++)
		r = push_rule(l, p[i], access, d, source); /* takes p[i], also on failure */
	for (; i < n; i++)
		free(p[i]);
	free(p);
	return r;
}

static int parse_access_name(struct loader *l, const char *key, const struct json_value *v,
			     unsigned *ret)
{
	const char *s = json_get_string(v, NULL);
	if (!s)
		return type_error(l, key, "access name", v);
	if (policy_access_from_string(s, ret) < 0)
		return errorf(l, -EINVAL, "%s: unknown access (read, write, delete, metadata, all)",
			      key);
	return 0;
}

static int parse_access(struct loader *l, const char *key, const struct json_value *v,
			unsigned *ret)
{
	if (!v) {
		*ret = POLICY_ACCESS_ALL;
		return 0;
	}
	if (json_type(v) == JSON_STRING)
		return parse_access_name(l, key, v, ret);
	if (json_type(v) != JSON_ARRAY)
		return type_error(l, key, "string or array of strings", v);
	if (json_array_len(v) == 0)
		return errorf(l, -EINVAL, "%s: empty access list", key);
	unsigned a = 0;
	for (size_t i = 0; i < json_array_len(v); i++) {
		unsigned bit;
		int r = parse_access_name(l, key, json_array_get(v, i), &bit);
		if (r < 0)
			return r;
		a |= bit;
	}
	*ret = a;
	return 0;
}

static int warn_unknown_rule_keys(struct loader *l, const char *key, const struct json_value *v)
{
	_cleanup_strbuf_ struct strbuf k = STRBUF_INIT;
	const char *name;
	for (size_t i = 0; i < json_object_len(v); i++) {
		json_object_member(v, i, &name, NULL);
		if (strcmp(name, "path") == 0 || strcmp(name, "access") == 0 ||
		    strcmp(name, "decision") == 0)
			continue;
		int r = warn_key(l, "unknown key", subkey(&k, key, ".%s", name));
		if (r < 0)
			return r;
	}
	return 0;
}

static int parse_decision(struct loader *l, const char *key, const struct json_value *v,
			  enum policy_decision *ret)
{
	const char *s = json_get_string(v, NULL);
	if (!v)
		return errorf(l, -EINVAL, "%s: missing", key);
	if (!s)
		return type_error(l, key, "string", v);
	if (policy_decision_from_string(s, ret) < 0)
		return errorf(l, -EINVAL, "%s: expected \"allow\", \"deny\" or \"prompt\"", key);
	return 0;
}

static int apply_rule(struct loader *l, const char *key, const struct json_value *v)
{
	_cleanup_strbuf_ struct strbuf k = STRBUF_INIT;
	_cleanup_free_ char *pattern = NULL;
	enum policy_decision d;
	unsigned access;
	int r;

	if (json_type(v) != JSON_OBJECT)
		return type_error(l, key, "object", v);
	if ((r = warn_unknown_rule_keys(l, key, v)) < 0)
		return r;
	const char *pk = subkey(&k, key, ".path");
	const struct json_value *p = json_object_get(v, "path");
	if (!p)
		return errorf(l, -EINVAL, "%s: missing", pk);
	if ((r = get_string(l, pk, p, &pattern)) < 0 || (r = check_pattern(l, pk, pattern)) < 0)
		return r;
	r = parse_access(l, subkey(&k, key, ".access"), json_object_get(v, "access"), &access);
	if (r < 0)
		return r;
	r = parse_decision(l, subkey(&k, key, ".decision"), json_object_get(v, "decision"), &d);
	if (r < 0)
		return r;
	return push_rule(l, TAKE_PTR(pattern), access, d, "rule");
}

static int apply_rules(struct loader *l, const char *key, const struct json_value *v)
{
	if (json_type(v) != JSON_ARRAY)
		return type_error(l, key, "array of rules", v);
	for (size_t i = 0; i < json_array_len(v); i++) {
		_cleanup_strbuf_ struct strbuf k = STRBUF_INIT;
		int r = apply_rule(l, subkey(&k, key, "[%zu]", i), json_array_get(v, i));
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- keys ---- */

static bool is_container(const char *key)
{
	return strcmp(key, "sandbox") == 0 || strcmp(key, "sandbox.fileBackup") == 0 ||
	       strcmp(key, "sandbox.git") == 0 || strcmp(key, "sandbox.fileSafety") == 0 ||
	       strcmp(key, "sandbox.network") == 0;
}

static int apply_object(struct loader *l, const char *prefix, const struct json_value *obj);

static int apply_leaf(struct loader *l, const char *key, const struct json_value *v)
{
	struct settings *s = l->s;
	if (strcmp(key, "sandbox.enabled") == 0)
		return apply_bool(l, key, v, SET_SANDBOX_ENABLED, &s->sandbox_enabled);
	if (strcmp(key, "sandbox.fileBackup.enabled") == 0)
		return apply_bool(l, key, v, SET_BACKUP_ENABLED, &s->backup_enabled);
	if (strcmp(key, "sandbox.fileBackup.denyOversize") == 0)
		return apply_bool(l, key, v, SET_DENY_OVERSIZE, &s->backup_deny_oversize);
	if (strcmp(key, "sandbox.deleteMode") == 0)
		return apply_delete_mode(l, key, v);
	if (strcmp(key, "sandbox.fileBackup.sync") == 0)
		return apply_bool(l, key, v, SET_SYNC, &s->backup_sync);
	if (strcmp(key, "sandbox.allowSetid") == 0)
		return apply_bool(l, key, v, SET_ALLOW_SETID, &s->allow_setid);
	if (strcmp(key, "sandbox.readOnlyMounts") == 0)
		return apply_bool(l, key, v, SET_READ_ONLY_MOUNTS, &s->read_only_mounts);
	if (strcmp(key, "sandbox.copyOnWrite") == 0)
		return apply_bool(l, key, v, SET_COPY_ON_WRITE, &s->copy_on_write);
	if (strcmp(key, "sandbox.git.allowHooks") == 0)
		return apply_bool(l, key, v, SET_GIT_HOOKS, &s->git_allow_hooks);
	if (strcmp(key, "sandbox.git.allowExecConfig") == 0)
		return apply_bool(l, key, v, SET_GIT_EXEC_CONFIG, &s->git_allow_exec_config);
	if (strcmp(key, "sandbox.fileBackup.maxSizeMB") == 0 ||
	    strcmp(key, "fileBackupMaxSizeMB") == 0)
		return apply_max_size(l, key, v);
	if (strcmp(key, "sandbox.excludedCommands") == 0)
		return apply_strings(l, key, v, STRING_PLAIN, &s->excluded_commands,
				     &s->n_excluded_commands);
	if (strcmp(key, "sandbox.fileSafety.allowlist") == 0)
		return apply_list(l, key, v, POLICY_ACCESS_MODIFY, POLICY_ALLOW, "allowlist");
	if (strcmp(key, "sandbox.fileSafety.blocklist") == 0)
		return apply_list(l, key, v, POLICY_ACCESS_ALL, POLICY_DENY, "blocklist");
	if (strcmp(key, "sandbox.fileSafety.rules") == 0)
		return apply_rules(l, key, v);
	if (strcmp(key, "sandbox.network.mode") == 0)
		return apply_net_mode(l, key, v);
	if (strcmp(key, "sandbox.network.allowLocalhost") == 0)
		return apply_bool(l, key, v, SET_NET_LOCALHOST, &s->net_allow_localhost);
	if (strcmp(key, "sandbox.network.allowedDomains") == 0)
		return apply_strings(l, key, v, STRING_DOMAIN, &s->net_allowed_domains,
				     &s->n_net_allowed_domains);
	if (strcmp(key, "sandbox.network.deniedDomains") == 0)
		return apply_strings(l, key, v, STRING_DOMAIN, &s->net_denied_domains,
				     &s->n_net_denied_domains);
	if (strcmp(key, "sandbox.network.allowUnixSockets") == 0)
		return apply_strings(l, key, v, STRING_PATTERN, &s->net_unix_sockets,
				     &s->n_net_unix_sockets);
	return warn_key(l, "unknown key", key);
}

static int apply_key(struct loader *l, const char *key, const struct json_value *v)
{
	if (!is_container(key))
		return apply_leaf(l, key, v);
	if (json_type(v) != JSON_OBJECT)
		return type_error(l, key, "object", v);
	return apply_object(l, key, v);
}

static int apply_object(struct loader *l, const char *prefix, const struct json_value *obj)
{
	for (size_t i = 0; i < json_object_len(obj); i++) {
		_cleanup_strbuf_ struct strbuf k = STRBUF_INIT;
		const char *name;
		const struct json_value *v = json_object_member(obj, i, &name, NULL);
		if (prefix && strbuf_printf(&k, "%s.", prefix) < 0)
			return -ENOMEM;
		if (strbuf_appends(&k, name) < 0)
			return -ENOMEM;
		int r = apply_key(l, k.buf, v);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- merging ---- */

/* The lists: src's items go onto the end of dst's (arrays of size-byte items, one spare slot). */
#define LIST(field)                                                                                \
	{                                                                                          \
		offsetof(struct settings, field), offsetof(struct settings, n_##field),            \
		    sizeof(*((struct settings *)0)->field)                                         \
	}
static const struct {
	size_t items, n, size;
} lists[] = {
    LIST(excluded_commands),  LIST(rules),
    LIST(warnings),	      LIST(net_allowed_domains),
    LIST(net_denied_domains), LIST(net_unix_sockets),
};

/* The scalars: taken from src where its file set them (present bits). */
#define SCALAR(bit, field)                                                                         \
	{                                                                                          \
		bit, offsetof(struct settings, field), sizeof(((struct settings *)0)->field)       \
	}
static const struct {
	unsigned bit;
	size_t offset, size;
} scalars[] = {
    SCALAR(SET_SANDBOX_ENABLED, sandbox_enabled),
    SCALAR(SET_BACKUP_ENABLED, backup_enabled),
    SCALAR(SET_MAX_SIZE, backup_max_size_mb),
    SCALAR(SET_DENY_OVERSIZE, backup_deny_oversize),
    SCALAR(SET_DELETE_MODE, delete_to_trash),
    SCALAR(SET_SYNC, backup_sync),
    SCALAR(SET_ALLOW_SETID, allow_setid),
    SCALAR(SET_GIT_HOOKS, git_allow_hooks),
    SCALAR(SET_GIT_EXEC_CONFIG, git_allow_exec_config),
    SCALAR(SET_NET_MODE, net_mode),
    SCALAR(SET_NET_LOCALHOST, net_allow_localhost),
    SCALAR(SET_READ_ONLY_MOUNTS, read_only_mounts),
    SCALAR(SET_COPY_ON_WRITE, copy_on_write),
};

/* Move the lists of src onto the end of dst's, and the scalars src's file set; no failure after
 * the reservations. */
static int merge(struct settings *dst, struct settings *src, unsigned present)
{
	/* the fields are read and written with memcpy: they are pointers of several types */
	char *d = (char *)dst, *s = (char *)src;
	for (size_t i = 0; i < ELEMENTSOF(lists); i++) {
		char *items;
		size_t n_dst, n_src;
		memcpy(&items, d + lists[i].items, sizeof items);
		memcpy(&n_dst, d + lists[i].n, sizeof n_dst);
		memcpy(&n_src, s + lists[i].n, sizeof n_src);
		if (!(items = reallocarray(items, n_dst + n_src + 1, lists[i].size)))
			return -ENOMEM;
		memcpy(d + lists[i].items, &items, sizeof items);
	}
	for (size_t i = 0; i < ELEMENTSOF(lists); i++) {
		char *to, *from;
		size_t n_dst, n_src;
		memcpy(&to, d + lists[i].items, sizeof to);
		memcpy(&from, s + lists[i].items, sizeof from);
		memcpy(&n_dst, d + lists[i].n, sizeof n_dst);
		memcpy(&n_src, s + lists[i].n, sizeof n_src);
		if (n_src)
			memcpy(to + n_dst * lists[i].size, from, n_src * lists[i].size);
		n_dst += n_src;
		n_src = 0;
		memcpy(d + lists[i].n, &n_dst, sizeof n_dst);
		memcpy(s + lists[i].n, &n_src, sizeof n_src);
	}
	for (size_t i = 0; i < ELEMENTSOF(scalars); i++)
		if (present & scalars[i].bit)
			memcpy(d + scalars[i].offset, s + scalars[i].offset, scalars[i].size);
	return 0;
}

/* "NAME:LINE:COL: reason", as compilers write it, so that editors can jump there */
static int parse_error(const char *name, int r, const struct json_error *je,
		       struct settings_error *err)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s:%u:%u: %s", name, je->line, je->column, je->reason);
	(void)set_message(err, &sb);
	return r == -ENOMEM || r == -E2BIG ? r : -EINVAL;
}

int settings_load_buffer(struct settings *s, const char *name, const char *buf, size_t n,
			 struct settings_error *err)
{
	static const struct json_limits limits = {
	    .max_depth = 16,
	    .max_size = SETTINGS_FILE_MAX,
	    .flags = JSON_ALLOW_COMMENTS | JSON_ALLOW_TRAILING_COMMAS | JSON_ALLOW_RAW_BYTES,
	};
	struct settings file;
	struct loader l = {.name = name, .s = &file, .err = err};
	_cleanup_json_ struct json_value *v = NULL;
	struct json_error je = {0};
	int r;

	settings_defaults(&file);
	r = json_parse(buf, n, &limits, &v, &je);
	if (r < 0)
		return parse_error(name, r, &je, err);
	if (json_type(v) != JSON_OBJECT)
		r = errorf(&l, -EINVAL, "top level: expected object, got %s",
			   json_type_name(json_type(v)));
	else
		r = apply_object(&l, NULL, v);
	if (r >= 0)
		r = merge(s, &file, l.present);
	if (r == -ENOMEM && err && !err->message)
		(void)errorf(&l, r, "out of memory");
	settings_clear(&file);
	return r < 0 ? r : 0;
}

/* ---- files ---- */

static int file_error(const char *path, int r, const char *what, struct settings_error *err)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	char b[128];
	strbuf_printf(&sb, "%s: %s", path, what);
	if (r < 0)
		strbuf_printf(&sb, ": %s", strerror_r(-r, b, sizeof(b)));
	(void)set_message(err, &sb);
	return r < 0 ? r : -EPERM;
}

/* The checks of doas and OpenSSH: ours or root's, not writable by others, a regular file. */
static int check_file(const char *path, const struct stat *st, struct settings_error *err)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	if (!S_ISREG(st->st_mode))
		return file_error(path, 0, "not a regular file, refusing it", err);
	if (st->st_uid != geteuid() && st->st_uid != 0) {
		strbuf_printf(&sb, "owned by uid %u, not by you or root, refusing it",
			      (unsigned)st->st_uid);
		return file_error(path, 0, strbuf_cstr(&sb) ?: "refused", err);
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		strbuf_printf(&sb, "writable by group or others (mode %04o), refusing it",
			      (unsigned)(st->st_mode & 07777));
		return file_error(path, 0, strbuf_cstr(&sb) ?: "refused", err);
	}
	if (st->st_size > SETTINGS_FILE_MAX)
		return file_error(path, -E2BIG, "too large", err);
	return 0;
}

static int read_all(int fd, struct strbuf *sb)
{
	for (;;) {
		int r = strbuf_reserve(sb, 65536);
		if (r < 0)
			return r;
		size_t room = MIN((size_t)65536, (size_t)SETTINGS_FILE_MAX + 1 - sb->len);
		ssize_t n = RETRY_EINTR(read(fd, sb->buf + sb->len, room));
		if (n < 0)
			return negative_errno();
		if (n == 0)
			return 0;
		sb->len += (size_t)n;
		sb->buf[sb->len] = '\0';
		if (sb->len > SETTINGS_FILE_MAX) /* grew since fstat() */
			return -E2BIG;
	}
}

int settings_load_file(struct settings *s, const char *path, struct settings_error *err)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	struct stat st;
	/* O_NONBLOCK: a FIFO planted as settings.json must not hang us before fstat() says no */
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		int r = negative_errno();
		if (r == -ENOTDIR)
			r = -ENOENT;
		return file_error(path, r, "cannot open", err);
	}
	if (fstat(fd, &st) < 0)
		return file_error(path, negative_errno(), "cannot stat", err);
	int r = check_file(path, &st, err);
	if (r < 0)
		return r;
	if ((r = read_all(fd, &sb)) < 0)
		return file_error(path, r, "cannot read", err);
	return settings_load_buffer(s, path, sb.buf ? sb.buf : "", sb.len, err);
}

int settings_user_file(const char *home, const char *xdg_config_home, char **ret)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int r;
	/* the XDG spec: a relative $XDG_CONFIG_HOME is invalid and ignored */
	if (xdg_config_home && xdg_config_home[0] == '/')
		r = strbuf_printf(&sb, "%s/brokered/settings.json", xdg_config_home);
	else if (home && home[0] == '/')
		r = strbuf_printf(&sb, "%s/.config/brokered/settings.json", home);
	else
		return -ENOENT;
	if (r < 0)
		return r;
	char *p = strbuf_steal(&sb);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

int settings_workspace_file(const char *workspace, char **ret)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int r = path_join(workspace, ".brokered/settings.json", &sb);
	if (r < 0)
		return r;
	char *p = strbuf_steal(&sb);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

static int load_optional(struct settings *s, const char *path, struct settings_error *err)
{
	int r = settings_load_file(s, path, err);
	if (r == -ENOENT) {
		settings_error_done(err);
		return 0;
	}
	return r;
}

int settings_load_all(struct settings *s, const char *home, const char *xdg_config_home,
		      const char *workspace, const char *extra, struct settings_error *err)
{
	_cleanup_free_ char *user = NULL, *ws = NULL;
	int r = settings_user_file(home, xdg_config_home, &user);
	if (r < 0 && r != -ENOENT)
		return r;
	if (user && (r = load_optional(s, user, err)) < 0)
		return r;
	if (workspace) {
		if ((r = settings_workspace_file(workspace, &ws)) < 0)
			return r;
		if ((r = load_optional(s, ws, err)) < 0)
			return r;
	}
	if (extra)
		return settings_load_file(s, extra, err);
	return 0;
}
