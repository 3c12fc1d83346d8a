/* SPDX-License-Identifier: MIT */
#include "policy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/string-table.h"
#include "settings.h"

struct prule {
	char *pattern;	    /* absolute, normalised; may hold wildcards */
	size_t specificity; /* bytes before the first wildcard, trailing '/' not counted */
	bool literal;	    /* no wildcard: a plain prefix test */
	bool secret;	    /* built-in default: loses ties against user rules */
	unsigned access;
	enum policy_decision decision;
	char *reason;
};

struct prefix {
	char *path;
	char *reason;
	unsigned access; /* protections: what is refused; grants: what is granted */
};

struct policy {
	char *workspace, *scratch, *home, *state_dir;
	struct prule *rules; /* secrets first, then the user's in settings order */
	size_t n_rules;
	struct prefix *protected;
	size_t n_protected;
	struct prefix *grants;
	size_t n_grants;
	char **read_restricted;
	size_t n_read_restricted;
	bool git_allow_hooks; /* sandbox.git.allowHooks */
};

/* A decision with what made it. */
struct verdict {
	enum policy_decision d;
	const char *reason;
};

static const char *const shell_startup[] = {
    ".bashrc",	 ".bash_profile", ".bash_login", ".bash_logout", ".profile",	 ".zshrc",
    ".zprofile", ".zshenv",	  ".zlogin",	 ".zlogout",	 ".config/fish",
};

static const char *const secrets[] = {
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker/config.json",
    ".config/gh",
    ".config/gcloud",
    ".config/hub",
    ".netrc",
    ".git-credentials",
    ".password-store",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".local/share/keyrings",
    ".pki",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
};

/* ---- names ---- */

static const char *const policy_decision_table[] = {
    [POLICY_ALLOW] = "allow",
    [POLICY_PROMPT] = "prompt",
    [POLICY_DENY] = "deny",
};

const char *policy_decision_name(enum policy_decision d)
{
	return string_table_lookup_to_string(policy_decision_table,
					     ELEMENTSOF(policy_decision_table), d)
		   ?: "deny";
}

int policy_decision_from_string(const char *s, enum policy_decision *ret)
{
	ssize_t i = string_table_lookup_from_string(policy_decision_table,
						    ELEMENTSOF(policy_decision_table), s);
	if (i < 0)
		return (int)i;
	*ret = (enum policy_decision)i;
	return 0;
}

int policy_access_from_string(const char *s, unsigned *ret)
{
	static const struct {
		const char *name;
		unsigned bits;
	} names[] = {
	    {"read", POLICY_ACCESS_READ},     {"write", POLICY_ACCESS_WRITE},
	    {"delete", POLICY_ACCESS_DELETE}, {"metadata", POLICY_ACCESS_METADATA},
	    {"all", POLICY_ACCESS_ALL},
	};
	for (size_t i = 0; s && i < ELEMENTSOF(names); i++)
		if (strcmp(s, names[i].name) == 0) {
			*ret = names[i].bits;
			return 0;
		}
	return -EINVAL;
}

void policy_error_done(struct policy_error *e)
{
	if (!e)
		return;
	free(e->message);
	e->message = NULL;
}

_printf_(3, 4) static int policy_errorf(struct policy_error *e, int r, const char *fmt, ...)
{
	if (!e)
		return r;
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	va_list ap;
	va_start(ap, fmt);
	strbuf_vprintf(&sb, fmt, ap);
	va_end(ap);
	free(e->message);
	e->message = strbuf_steal(&sb);
	return r;
}

/* ---- matching ---- */

/* One component: '*' any run of bytes, '?' one byte. Iterative, O(|p|*|s|) at worst. */
static bool component_match(const char *p, size_t pn, const char *s, size_t sn)
{
	size_t pi = 0, si = 0, star = SIZE_MAX, mark = 0;
	while (si < sn) {
		if (pi < pn && p[pi] == '*') {
			star = pi++;
			mark = si;
		} else if (pi < pn && (p[pi] == '?' || p[pi] == s[si])) {
			pi++;
			si++;
		} else if (star != SIZE_MAX) {
			pi = star + 1;
			si = ++mark;
		} else
			return false;
	}
	while (pi < pn && p[pi] == '*')
		pi++;
	return pi == pn;
}

static const char *next_component(const char *s)
{
	const char *e = strchrnul(s, '/');
	return *e == '/' ? e + 1 : e;
}

static size_t component_len(const char *s)
{
	return (size_t)(strchrnul(s, '/') - s);
}

/*
 * Does the pattern match the path or one of its ancestors? Both absolute and normalised. A "**"
 * component matches any run of components; single backtracking to the last "**" suffices, as for
 * '*' in strings. Reaching the end of the pattern is a match: the rest of the path lies below.
 */
static bool glob_match(const char *pattern, const char *path)
{
	const char *p = pattern + 1, *s = path + 1;
	const char *star_p = NULL, *star_s = NULL;
	for (;;) {
		if (*p == '\0')
			return true;
		size_t pn = component_len(p);
		if (pn == 2 && p[0] == '*' && p[1] == '*') {
			p = star_p = next_component(p);
			star_s = s;
			continue;
		}
		if (*s && component_match(p, pn, s, component_len(s))) {
			p = next_component(p);
			s = next_component(s);
			continue;
		}
		if (!star_p || !*star_s)
			return false;
		s = star_s = next_component(star_s);
		p = star_p;
	}
}

static bool rule_matches(const struct prule *r, const char *path)
{
	return r->literal ? path_is_under(path, r->pattern) : glob_match(r->pattern, path);
}

/* ---- building ---- */

static void prule_done(struct prule *r)
{
	free(r->pattern);
	free(r->reason);
}

void policy_free(struct policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_rules; i++)
		prule_done(&p->rules[i]);
	free(p->rules);
	for (size_t i = 0; i < p->n_protected; i++) {
		free(p->protected[i].path);
		free(p->protected[i].reason);
	}
	free(p->protected);
	for (size_t i = 0; i < p->n_grants; i++)
		free(p->grants[i].path);
	free(p->grants);
	for (size_t i = 0; i < p->n_read_restricted; i++)
		free(p->read_restricted[i]);
	free(p->read_restricted);
	free(p->workspace);
	free(p->scratch);
	free(p->home);
	free(p->state_dir);
	free(p);
}

static void policy_freep(struct policy **p)
{
	policy_free(*p);
}

static int normalised_copy(const char *path, char **ret)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	*ret = NULL;
	if (!path)
		return 0;
	int r = path_normalise(path, &sb);
	if (r < 0)
		return r;
	*ret = strbuf_steal(&sb);
	return *ret ? 0 : -ENOMEM;
}

/* "~/x" → home/x, "x" → workspace/x, then normalised. */
static int expand_pattern(const struct policy *p, const char *pattern, struct strbuf *out)
{
	_cleanup_strbuf_ struct strbuf raw = STRBUF_INIT;
	int r;
	if (pattern[0] == '~' && (pattern[1] == '\0' || pattern[1] == '/')) {
		if (!p->home)
			return -ENOENT;
		r = path_join(p->home, pattern[1] ? pattern + 2 : "", &raw);
	} else if (pattern[0] == '~')
		return -EINVAL;
	else
		r = path_join(p->workspace, pattern, &raw);
	if (r < 0)
		return r;
	const char *c = strbuf_cstr(&raw);
	return c ? path_normalise(c, out) : -ENOMEM;
}

static int push_rule(struct policy *p, const char *pattern, unsigned access, enum policy_decision d,
		     bool secret, const char *reason_prefix, struct policy_error *err)
{
	_cleanup_strbuf_ struct strbuf abs = STRBUF_INIT, reason = STRBUF_INIT;
	int r = expand_pattern(p, pattern, &abs);
	if (r == -ENOENT)
		return policy_errorf(err, -EINVAL, "pattern \"%s\" needs a home directory",
				     pattern);
	if (r == -EINVAL)
		return policy_errorf(err, r, "pattern \"%s\": \"~user\" is not supported", pattern);
	if (r < 0 || (r = strbuf_printf(&reason, "%s%s", reason_prefix, pattern)) < 0)
		return r;
	struct prule *m = reallocarray(p->rules, p->n_rules + 1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	p->rules = m;
	size_t wild = strcspn(abs.buf, "*?");
	struct prule nr = {
	    .literal = abs.buf[wild] == '\0',
	    .specificity = wild > 1 && abs.buf[wild - 1] == '/' ? wild - 1 : wild,
	    .secret = secret,
	    .access = access,
	    .decision = d,
	};
	nr.pattern = strbuf_steal(&abs);
	nr.reason = strbuf_steal(&reason);
	if (!nr.pattern || !nr.reason) {
		prule_done(&nr);
		return -ENOMEM;
	}
	p->rules[p->n_rules++] = nr;
	return 0;
}

static int push_prefix(struct prefix **v, size_t *n, const char *path, const char *reason,
		       unsigned access)
{
	_cleanup_free_ char *np = NULL, *nr = NULL;
	int r = normalised_copy(path, &np);
	if (r < 0)
		return r;
	if (reason && !(nr = strdup(reason)))
		return -ENOMEM;
	struct prefix *m = reallocarray(*v, *n + 1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m[(*n)++] = (struct prefix){TAKE_PTR(np), TAKE_PTR(nr), access};
	*v = m;
	return 0;
}

int policy_protect(struct policy *p, const char *path, const char *name)
{
	_cleanup_strbuf_ struct strbuf reason = STRBUF_INIT;
	if (!path || path[0] != '/' || !name)
		return -EINVAL;
	if (strbuf_printf(&reason, "protected:%s", name) < 0)
		return -ENOMEM;
	return push_prefix(&p->protected, &p->n_protected, path, reason.buf, POLICY_ACCESS_MODIFY);
}

int policy_add_grant(struct policy *p, const char *path, unsigned access)
{
	if (!path || path[0] != '/' || (access & ~(unsigned)POLICY_ACCESS_ALL))
		return -EINVAL;
	return push_prefix(&p->grants, &p->n_grants, path, NULL, access);
}

static int add_home_protections(struct policy *p)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int r;
	for (size_t i = 0; i < ELEMENTSOF(shell_startup); i++) {
		if ((r = path_join(p->home, shell_startup[i], &sb)) < 0 ||
		    (r = policy_protect(p, sb.buf, "shell-startup")) < 0)
			return r;
	}
	if ((r = path_join(p->home, ".config/brokered", &sb)) < 0)
		return r;
	return policy_protect(p, sb.buf, "brokered-settings");
}

static int add_protections(struct policy *p)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int r;
	if (p->home && (r = add_home_protections(p)) < 0)
		return r;
	if ((r = path_join(p->workspace, ".brokered", &sb)) < 0 ||
	    (r = policy_protect(p, sb.buf, "brokered-settings")) < 0)
		return r;
	if (p->state_dir && (r = policy_protect(p, p->state_dir, "state-dir")) < 0)
		return r;
	return 0;
}

static int add_secrets(struct policy *p, struct policy_error *err)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	int r;
	for (size_t i = 0; p->home && i < ELEMENTSOF(secrets); i++) {
		strbuf_reset(&sb);
		if ((r = strbuf_printf(&sb, "~/%s", secrets[i])) < 0 ||
		    (r = push_rule(p, sb.buf, POLICY_ACCESS_ALL, POLICY_DENY, true,
				   "default:secret:", err)) < 0)
			return r;
	}
	/* the store holds pre-images of other runs' files: not for the sandbox to read either */
	if (p->state_dir && (r = push_rule(p, p->state_dir, POLICY_ACCESS_ALL, POLICY_DENY, true,
					   "default:secret:", err)) < 0)
		return r;
	return 0;
}

static int add_user_rules(struct policy *p, const struct settings *s, struct policy_error *err)
{
	_cleanup_strbuf_ struct strbuf prefix = STRBUF_INIT;
	for (size_t i = 0; s && i < s->n_rules; i++) {
		const struct settings_rule *r = &s->rules[i];
		strbuf_reset(&prefix);
		if (strbuf_printf(&prefix, "%s:", r->source ? r->source : "rule") < 0)
			return -ENOMEM;
		int k = push_rule(p, r->pattern, r->access, r->decision, false, prefix.buf, err);
		if (k < 0)
			return k;
	}
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directory part of a pattern before its first wildcard. */
static char *read_prefix_of(const struct prule *r)
{
	if (r->literal)
		return strdup(r->pattern);
	size_t wild = strcspn(r->pattern, "*?");
	const char *slash = memrchr(r->pattern, '/', wild);
	size_t n = slash == r->pattern ? 1 : (size_t)(slash - r->pattern);
	return strndup(r->pattern, n);
}

static int build_read_restricted(struct policy *p)
{
	size_t n = 0;
	for (size_t i = 0; i < p->n_rules; i++)
		n += (p->rules[i].access & POLICY_ACCESS_READ) &&
		     p->rules[i].decision != POLICY_ALLOW;
	if (n == 0)
		return 0;
	char **v = calloc(n, sizeof(char *));
	if (!v)
		return -ENOMEM;
	p->read_restricted = v;
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct prule *r = &p->rules[i];
		if (!(r->access & POLICY_ACCESS_READ) || r->decision == POLICY_ALLOW)
			continue;
		if (!(v[p->n_read_restricted] = read_prefix_of(r)))
			return -ENOMEM;
		p->n_read_restricted++;
	}
	/* sorted, a prefix comes right before what lies below it: keep only the outermost */
	qsort(v, p->n_read_restricted, sizeof(char *), cmp_str);
	size_t k = 0;
	for (size_t i = 0; i < p->n_read_restricted; i++) {
		if (k > 0 && path_is_under(v[i], v[k - 1])) {
			free(v[i]);
			continue;
		}
		v[k++] = v[i];
	}
	p->n_read_restricted = k;
	return 0;
}

int policy_new(const struct settings *settings, const char *workspace, const char *scratch,
	       const char *home, const char *state_dir, struct policy **ret,
	       struct policy_error *err)
{
	_cleanup_(policy_freep) struct policy *p = calloc(1, sizeof(*p));
	int r;
	if (!p)
		return -ENOMEM;
	if (!workspace || workspace[0] != '/')
		return policy_errorf(err, -EINVAL, "workspace must be an absolute path");
	if ((scratch && scratch[0] != '/') || (home && home[0] != '/') ||
	    (state_dir && state_dir[0] != '/'))
		return policy_errorf(err, -EINVAL, "scratch, home and state dir must be absolute");
	if ((r = normalised_copy(workspace, &p->workspace)) < 0 ||
	    (r = normalised_copy(scratch, &p->scratch)) < 0 ||
	    (r = normalised_copy(home, &p->home)) < 0 ||
	    (r = normalised_copy(state_dir, &p->state_dir)) < 0)
		return r;
	p->git_allow_hooks = settings && settings->git_allow_hooks;
	if ((r = add_protections(p)) < 0 || (r = add_secrets(p, err)) < 0 ||
	    (r = add_user_rules(p, settings, err)) < 0 || (r = build_read_restricted(p)) < 0)
		return r;
	*ret = TAKE_PTR(p);
	return 0;
}

/* ---- deciding ---- */

static struct verdict worse(struct verdict a, struct verdict b)
{
	return b.d > a.d ? b : a;
}

static bool component_is(const char *s, const char *name)
{
	size_t n = strlen(name);
	return strncmp(s, name, n) == 0 && (s[n] == '/' || s[n] == '\0');
}

/* What lies after one ".git" component (at g, just past ".git/"), for one access bit. */
static struct verdict git_after(const char *g, unsigned bit)
{
	static const struct verdict none = {POLICY_ALLOW, NULL};
	static const struct verdict hooks = {POLICY_PROMPT, "git:hook"};
	/* Hooks run code outside the sandbox at the user's next git command: adding or changing
	 * one needs the user's approval. Removing one cannot run code. Configuration is judged on
	 * its content when the command ends (git-guard.c). */
	if (bit == POLICY_ACCESS_DELETE)
		return none;
	for (const char *c = g; *c; c = next_component(c)) {
		/* hooks right after ".git/", or anywhere below ".git/modules/" (submodules) */
		if (c != g && !component_is(g, "modules"))
			break;
		if (!component_is(c, "hooks"))
			continue;
		/* `git init` and `clone` create the directory and inert *.sample files: those never
		 * run. */
		const char *rest = next_component(c);
		size_t n = strlen(rest);
		if (*rest == '\0' ||
		    (!strchr(rest, '/') && n > 7 && !strcmp(rest + n - 7, ".sample")))
			return none;
		return hooks;
	}
	return none;
}

/* The git protections of one access bit, over every ".git" component of the path. */
static struct verdict git_protection(const struct policy *p, const char *path, unsigned bit)
{
	struct verdict v = {POLICY_ALLOW, NULL};
	if (bit == POLICY_ACCESS_READ || p->git_allow_hooks ||
	    (p->scratch && path_is_under(path, p->scratch)))
		return v;
	for (const char *c = path + 1; *c; c = next_component(c)) {
		if (!component_is(c, ".git"))
			continue;
		const char *after = next_component(c);
		if (*after != '\0')
			v = worse(v, git_after(after, bit));
	}
	return v;
}

static struct verdict protection(const struct policy *p, const char *path, unsigned bit)
{
	for (size_t i = 0; i < p->n_protected; i++) {
		const struct prefix *x = &p->protected[i];
		if (!(x->access & bit))
			continue;
		if (path_is_under(path, x->path))
			return (struct verdict){POLICY_DENY, x->reason};
		/* replacing an ancestor would swap the protected tree for another in one rename */
		if ((bit & (POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE)) &&
		    path_is_under(x->path, path))
			return (struct verdict){POLICY_DENY, x->reason};
	}
	return git_protection(p, path, bit);
}

/* Does a beat b? Specificity, then user over secret, then strictness, then later (a is later). */
static bool rule_beats(const struct prule *a, const struct prule *b)
{
	if (a->specificity != b->specificity)
		return a->specificity > b->specificity;
	if (a->secret != b->secret)
		return !a->secret;
	return a->decision >= b->decision;
}

static const struct prule *best_rule(const struct policy *p, const char *path, unsigned bit)
{
	const struct prule *best = NULL;
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct prule *r = &p->rules[i];
		if ((r->access & bit) && rule_matches(r, path) && (!best || rule_beats(r, best)))
			best = r;
	}
	return best;
}

static struct verdict base_decision(const struct policy *p, const char *path, unsigned bit)
{
	const struct prule *r = best_rule(p, path, bit);
	if (r)
		return (struct verdict){r->decision, r->reason};
	if (p->scratch && path_is_under(path, p->scratch))
		return (struct verdict){POLICY_ALLOW, "default:scratch"};
	if (path_is_under(path, p->workspace))
		return (struct verdict){POLICY_ALLOW, "default:workspace"};
	if (bit == POLICY_ACCESS_READ)
		return (struct verdict){POLICY_ALLOW, "default:read"};
	return (struct verdict){POLICY_DENY, "default:read-only"};
}

static bool granted(const struct policy *p, const char *path, unsigned bit)
{
	for (size_t i = 0; i < p->n_grants; i++)
		if ((p->grants[i].access & bit) && path_is_under(path, p->grants[i].path))
			return true;
	return false;
}

bool policy_granted(const struct policy *p, const char *path, unsigned access)
{
	for (unsigned bit = 1; bit & POLICY_ACCESS_ALL; bit <<= 1)
		if ((access & bit) && !granted(p, path, bit))
			return false;
	return access != 0;
}

/*
 * Replacing or removing a directory moves everything below it: a write or delete of an ancestor
 * of a path that a deny rule (a secret, a blocklist entry) protects from writes is refused, or
 * "mv ~/.docker x; edit x/config.json; mv x ~/.docker" would rewrite the secret.
 */
static struct verdict holds_denied(const struct policy *p, const char *path, unsigned bit)
{
	struct verdict none = {POLICY_ALLOW, NULL};
	if (!(bit & (POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE)))
		return none;
	size_t n = strlen(path);
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct prule *r = &p->rules[i];
		if (r->decision != POLICY_DENY ||
		    !(r->access & (POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE)))
			continue;
		/* the literal part of the pattern (all of it, or up to the first wildcard) */
		size_t lit = r->literal ? strlen(r->pattern) : r->specificity;
		if (lit <= n || strncmp(r->pattern, path, n) != 0)
			continue;
		if ((n == 1 && path[0] == '/') || r->pattern[n] == '/')
			return (struct verdict){POLICY_DENY, r->reason};
	}
	return none;
}

static struct verdict decide_bit(const struct policy *p, const char *path, unsigned bit)
{
	struct verdict prot = protection(p, path, bit);
	if (prot.d == POLICY_DENY)
		return prot;
	struct verdict held = holds_denied(p, path, bit);
	if (held.d == POLICY_DENY)
		return held;
	struct verdict v = base_decision(p, path, bit);
	if (prot.reason && prot.d >= v.d)
		v = prot;
	if (v.d == POLICY_PROMPT && granted(p, path, bit))
		return (struct verdict){POLICY_ALLOW, "grant:user"};
	return v;
}

static bool is_normalised(const char *s)
{
	if (s[0] != '/')
		return false;
	for (const char *c = s; *c; c++) {
		if (*c != '/')
			continue;
		const char *n = c + 1;
		if (*n == '/' || (*n == '\0' && c != s))
			return false;
		if (n[0] == '.' && (n[1] == '/' || n[1] == '\0'))
			return false;
		if (n[0] == '.' && n[1] == '.' && (n[2] == '/' || n[2] == '\0'))
			return false;
	}
	return true;
}

enum policy_decision policy_check(const struct policy *p, const char *real_path, unsigned access,
				  const char **ret_reason)
{
	_cleanup_strbuf_ struct strbuf norm = STRBUF_INIT;
	struct verdict v = {POLICY_ALLOW, NULL};
	const char *path = real_path;

	if (!p || !path || path[0] != '/')
		v = (struct verdict){POLICY_DENY, "error:relative-path"};
	else if (access == 0 || (access & ~(unsigned)POLICY_ACCESS_ALL))
		v = (struct verdict){POLICY_DENY, "error:invalid-access"};
	else if (!is_normalised(path)) {
		if (path_normalise(path, &norm) < 0 || !(path = strbuf_cstr(&norm)))
			v = (struct verdict){POLICY_DENY, "error:out-of-memory"};
	}
	if (!v.reason) {
		/* the strictest bit decides; its reason is the first one with that decision */
		bool first = true;
		for (unsigned bit = 1; bit & POLICY_ACCESS_ALL; bit <<= 1) {
			if (!(access & bit))
				continue;
			struct verdict b = decide_bit(p, path, bit);
			if (first || b.d > v.d)
				v = b;
			first = false;
		}
	}
	if (ret_reason)
		*ret_reason = v.reason;
	return v.d;
}

int policy_display_path(const struct policy *p, const char *path, struct strbuf *out)
{
	_cleanup_strbuf_ struct strbuf norm = STRBUF_INIT;
	int r = path_normalise(path, &norm);
	if (r < 0)
		return r;
	const char *n = strbuf_cstr(&norm);
	if (!n)
		return -ENOMEM;
	return path_home_to_tilde(n, p->home, out);
}

const char *const *policy_read_restricted(const struct policy *p, size_t *ret_n)
{
	*ret_n = p->n_read_restricted;
	return (const char *const *)p->read_restricted;
}

bool policy_metadata_follows_write(const struct policy *p)
{
	for (size_t i = 0; i < p->n_rules; i++) {
		unsigned a = p->rules[i].access;
		if (!(a & POLICY_ACCESS_WRITE) != !(a & POLICY_ACCESS_METADATA))
			return false;
	}
	return true;
}

const char *policy_copy_on_write_blocker(const struct policy *p)
{
	const unsigned changes =
	    POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE | POLICY_ACCESS_METADATA;
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct prule *r = &p->rules[i];
		if (r->decision != POLICY_ALLOW || !(r->access & changes))
			continue;
		_cleanup_free_ char *dir = read_prefix_of(r);
		if (!dir)
			return "out of memory";
		if (!path_is_under(dir, p->workspace))
			return "a rule allows writes outside the workspace";
	}
	for (size_t i = 0; i < p->n_grants; i++)
		if ((p->grants[i].access & changes) &&
		    !path_is_under(p->grants[i].path, p->workspace))
			return "a grant allows writes outside the workspace";
	for (size_t i = 0; i < p->n_read_restricted; i++)
		if (path_is_under(p->read_restricted[i], p->workspace) ||
		    path_is_under(p->workspace, p->read_restricted[i]))
			return "reads are restricted in the workspace";
	return NULL;
}

bool policy_needs_read_checks(const struct policy *p)
{
	return p->n_read_restricted > 0;
}

int policy_pattern_matches(const struct policy *p, const char *pattern, const char *real_path)
{
	_cleanup_strbuf_ struct strbuf pat = STRBUF_INIT;
	int r = expand_pattern(p, pattern, &pat);
	if (r < 0)
		return r;
	const char *c = strbuf_cstr(&pat);
	if (!c)
		return -ENOMEM;
	return glob_match(c, real_path);
}
