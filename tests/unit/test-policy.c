/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/escape.h"
#include "basic/macro.h"
#include "basic/strbuf.h"
#include "policy.h"
#include "settings.h"

/* tap.h's is_int()/is_str() nest ok(), whose local shadows theirs. */
#pragma GCC diagnostic ignored "-Wshadow"
#include "tap.h"

#define HOME	"/home/u"
#define WS	HOME "/proj"
#define SCRATCH "/tmp/brokered-run"
#define STATE	HOME "/.local/state/brokered"

enum {
	R = POLICY_ACCESS_READ,
	W = POLICY_ACCESS_WRITE,
	D = POLICY_ACCESS_DELETE,
	M = POLICY_ACCESS_METADATA,
	A = POLICY_ACCESS_ALL,
};

struct check {
	const char *path;
	unsigned access;
	enum policy_decision want;
	const char *reason;
};

static void run_table(const struct policy *p, const char *name, const struct check *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *reason = NULL;
		struct strbuf esc = STRBUF_INIT;
		enum policy_decision d = policy_check(p, t[i].path, t[i].access, &reason);
		escape_appends(&esc, t[i].path); /* keep each TAP line one line */
		if (!ok(d == t[i].want && reason && strcmp(reason, t[i].reason) == 0,
			"%s[%zu] %s %#x → %s %s", name, i, esc.len ? esc.buf : "", t[i].access,
			policy_decision_name(t[i].want), t[i].reason))
			printf("#   got: %s %s\n", policy_decision_name(d),
			       reason ? reason : "(null)");
		strbuf_free(&esc);
	}
}

static struct policy *make_policy(const char *json)
{
	struct settings *s = NULL;
	struct settings_error se = {0};
	struct policy_error pe = {0};
	struct policy *p = NULL;
	if (settings_new(&s) < 0)
		return NULL;
	if (json && settings_load_buffer(s, "test.json", json, strlen(json), &se) < 0)
		printf("# settings: %s\n", se.message);
	if (policy_new(s, WS, SCRATCH, HOME, STATE, &p, &pe) < 0)
		printf("# policy: %s\n", pe.message);
	settings_error_done(&se);
	policy_error_done(&pe);
	settings_free(s);
	return p;
}

static const struct check defaults[] = {
    {WS "/src/a.c", W, POLICY_ALLOW, "default:workspace"},
    {WS "/src/a.c", A, POLICY_ALLOW, "default:workspace"},
    {WS, M, POLICY_ALLOW, "default:workspace"},
    {"/etc/passwd", R, POLICY_ALLOW, "default:read"},
    {"/etc/passwd", W, POLICY_DENY, "default:read-only"},
    {"/etc/passwd", R | W, POLICY_DENY, "default:read-only"},
    {"/etc/passwd", D, POLICY_DENY, "default:read-only"},
    {"/etc/passwd", M, POLICY_DENY, "default:read-only"},
    {SCRATCH "/x", W, POLICY_ALLOW, "default:scratch"},
    {SCRATCH, D, POLICY_ALLOW, "default:scratch"},
    {"/tmp/brokered-runx", W, POLICY_DENY, "default:read-only"},
    {HOME "/notes.txt", W, POLICY_DENY, "default:read-only"},
    /* secrets: neither readable nor writable, on component boundaries */
    {HOME "/.ssh/id_rsa", R, POLICY_DENY, "default:secret:~/.ssh"},
    {HOME "/.ssh", R, POLICY_DENY, "default:secret:~/.ssh"},
    {HOME "/.ssh/authorized_keys", W, POLICY_DENY, "default:secret:~/.ssh"},
    {HOME "/.sshx", R, POLICY_ALLOW, "default:read"},
    {HOME "/.docker/config.json", R, POLICY_DENY, "default:secret:~/.docker/config.json"},
    {HOME "/.docker/other", R, POLICY_ALLOW, "default:read"},
    {HOME "/.netrc", R, POLICY_DENY, "default:secret:~/.netrc"},
    {HOME "/.config/gh/hosts.yml", R, POLICY_DENY, "default:secret:~/.config/gh"},
    {STATE "/sessions/s/x", R, POLICY_DENY, "default:secret:" STATE},
    /* protections: reads pass, changes never */
    {HOME "/.bashrc", R, POLICY_ALLOW, "default:read"},
    {HOME "/.bashrc", W, POLICY_DENY, "protected:shell-startup"},
    {HOME "/.zshenv", M, POLICY_DENY, "protected:shell-startup"},
    {HOME "/.profile", D, POLICY_DENY, "protected:shell-startup"},
    {HOME "/.config/fish/config.fish", W, POLICY_DENY, "protected:shell-startup"},
    {HOME "/.config/brokered/settings.json", W, POLICY_DENY, "protected:brokered-settings"},
    {HOME "/.config/brokered/settings.json", R, POLICY_ALLOW, "default:read"},
    {WS "/.brokered/settings.json", W, POLICY_DENY, "protected:brokered-settings"},
    {WS "/.brokered/settings.json", R, POLICY_ALLOW, "default:workspace"},
    {WS "/.brokered", D, POLICY_DENY, "protected:brokered-settings"},
    {WS "/.brokeredx", W, POLICY_ALLOW, "default:workspace"},
    {STATE "/sessions/s/x", W, POLICY_DENY, "protected:state-dir"},
    /* replacing an ancestor of a protected path */
    {WS, W, POLICY_DENY, "protected:brokered-settings"},
    {WS, D, POLICY_DENY, "protected:brokered-settings"},
    {"/", W, POLICY_DENY, "protected:shell-startup"},
    /* git */
    {WS "/.git/hooks/pre-commit", W, POLICY_PROMPT, "git:hook"},
    {WS "/.git/hooks/pre-commit", M, POLICY_PROMPT, "git:hook"},
    {WS "/.git/hooks/pre-commit", D, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/hooks/pre-commit", R, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/hooks", W, POLICY_ALLOW, "default:workspace"}, /* git init makes it */
    {WS "/.git/hooks/pre-commit.sample", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/hooks/pre-commit", W, POLICY_PROMPT, "git:hook"},
    {WS "/.git/hooks/x.sample/y", W, POLICY_PROMPT, "git:hook"},
    {WS "/.git/config", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/config", R | W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/config", D, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/config.worktree", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/config.lock", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git", D, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/objects/ab/cdef", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/refs/heads/hooks", W, POLICY_ALLOW, "default:workspace"},
    {WS "/sub/.git/config", W, POLICY_ALLOW, "default:workspace"},
    {WS "/sub/.git/hooks/x", W, POLICY_PROMPT, "git:hook"},
    {WS "/.git/modules/lib/hooks/post-checkout", W, POLICY_PROMPT, "git:hook"},
    {WS "/.git/modules/a/b/hooks/x", W, POLICY_PROMPT, "git:hook"},
    {WS "/.git/modules/lib/config", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/modules/lib/hooks", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/modules/lib/hooks/pre-push.sample", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git/modules", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.gitx/config", W, POLICY_ALLOW, "default:workspace"},
    {WS "/x.git/hooks/a", W, POLICY_ALLOW, "default:workspace"},
    {SCRATCH "/repo/.git/config", W, POLICY_ALLOW, "default:scratch"},
    {SCRATCH "/repo/.git/hooks/pre-commit", W, POLICY_ALLOW, "default:scratch"},
    {HOME "/other/.git/config", W, POLICY_DENY, "default:read-only"},
    /* errors and hostile names */
    {"relative/path", R, POLICY_DENY, "error:relative-path"},
    {"", R, POLICY_DENY, "error:relative-path"},
    {WS "/a", 0, POLICY_DENY, "error:invalid-access"},
    {WS "/a", 1u << 4, POLICY_DENY, "error:invalid-access"},
    {WS "/../.ssh/id_rsa", R, POLICY_DENY, "default:secret:~/.ssh"},
    {HOME "//proj/./a", W, POLICY_ALLOW, "default:workspace"},
    {WS "/../../../../../etc/passwd", W, POLICY_DENY, "default:read-only"},
    {WS "/a/..", W, POLICY_DENY, "protected:brokered-settings"},
    {WS "/a/", W, POLICY_ALLOW, "default:workspace"},
    {WS "/a\nb", W, POLICY_ALLOW, "default:workspace"},
    {WS "/tab\there", W, POLICY_ALLOW, "default:workspace"},
    {WS "/\xff\xfe\x80", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.git\n/config", W, POLICY_ALLOW, "default:workspace"},
    {HOME "/.ssh\n", R, POLICY_ALLOW, "default:read"},
    {WS "/...", W, POLICY_ALLOW, "default:workspace"},
    {WS "/.../.git/config", W, POLICY_ALLOW, "default:workspace"},
};

static void test_defaults(void)
{
	struct policy *p = make_policy(NULL);
	ok(p != NULL, "policy with defaults");
	run_table(p, "defaults", defaults, ELEMENTSOF(defaults));

	size_t n = 0;
	const char *const *v = policy_read_restricted(p, &n);
	bool ssh = false, state = false, nested = false;
	for (size_t i = 0; i < n; i++) {
		ssh |= strcmp(v[i], HOME "/.ssh") == 0;
		state |= strcmp(v[i], STATE) == 0;
		for (size_t j = 0; j < n; j++)
			nested |= i != j && strncmp(v[i], v[j], strlen(v[j])) == 0 &&
				  v[i][strlen(v[j])] == '/';
	}
	ok(n > 10 && ssh && state && !nested, "read-restricted: secrets, outermost only (%zu)", n);
	ok(policy_needs_read_checks(p), "secrets need read checks");
	policy_free(p);
}

static const char rules_json[] =
    "{\n"
    "  // comments are fine in settings files\n"
    "  \"sandbox\": {\"fileSafety\": {\n"
    "    \"allowlist\": [\"~/notes\", \"/srv/data/*.csv\", \"~\", \"~/.config\"],\n"
    "    \"blocklist\": [\"secrets\", \"~/proj/vendor/**/private\"],\n"
    "    \"rules\": [\n"
    "      {\"path\": \"~/proj/secrets/public\", \"access\": [\"read\"], \"decision\": "
    "\"allow\"},\n"
    "      {\"path\": \"~/.aws/config\", \"access\": \"read\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"~/.kube/**\", \"access\": \"read\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"~/.config/brokered\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"~/.bashrc\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"~/proj/.git\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"" STATE "\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"build\", \"access\": \"write\", \"decision\": \"deny\"},\n"
    "      {\"path\": \"build\", \"access\": \"write\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"gen/*\", \"access\": \"write\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"gen/*\", \"access\": \"write\", \"decision\": \"prompt\"},\n"
    "      {\"path\": \"~/docs/**\", \"access\": \"write\", \"decision\": \"prompt\"},\n"
    "      {\"path\": \"?.txt\", \"access\": [\"write\", \"delete\"], \"decision\": \"deny\"},\n"
    "      {\"path\": \"/opt/x/**/y/**/z\", \"access\": \"write\", \"decision\": \"allow\"},\n"
    "      {\"path\": \"/var/*a*a*a*a*a*b\", \"access\": \"write\", \"decision\": \"allow\"},\n"
    "    ],\n"
    "  }},\n"
    "}\n";

static const struct check with_rules[] = {
    {HOME "/notes/a", W, POLICY_ALLOW, "allowlist:~/notes"},
    {HOME "/notes/a", R, POLICY_ALLOW, "default:read"},
    {"/srv/data/a.csv", W, POLICY_ALLOW, "allowlist:/srv/data/*.csv"},
    {"/srv/data/a.csv/below", W, POLICY_ALLOW, "allowlist:/srv/data/*.csv"},
    {"/srv/data/sub/a.csv", W, POLICY_DENY, "default:read-only"},
    {"/srv/data/a.csvx", W, POLICY_DENY, "default:read-only"},
    {WS "/secrets/k", R, POLICY_DENY, "blocklist:secrets"},
    {WS "/secrets/k", W, POLICY_DENY, "blocklist:secrets"},
    {WS "/secrets/public/x", R, POLICY_ALLOW, "rule:~/proj/secrets/public"},
    {WS "/secrets/public/x", W, POLICY_DENY, "blocklist:secrets"},
    {WS "/vendor/private", R, POLICY_DENY, "blocklist:~/proj/vendor/**/private"},
    {WS "/vendor/a/b/private/x", R, POLICY_DENY, "blocklist:~/proj/vendor/**/private"},
    {WS "/vendor/a/privatex", W, POLICY_ALLOW, "allowlist:~"},
    /* the user rule wins over the workspace default, and "~" over read-only */
    {HOME "/foo", W, POLICY_ALLOW, "allowlist:~"},
    {WS "/src/a.c", W, POLICY_ALLOW, "allowlist:~"},
    /* secrets outrank less specific user rules; equally specific user rules win */
    {HOME "/.ssh/id_rsa", W, POLICY_DENY, "default:secret:~/.ssh"},
    {HOME "/.aws/config", R, POLICY_ALLOW, "rule:~/.aws/config"},
    {HOME "/.aws/credentials", R, POLICY_DENY, "default:secret:~/.aws"},
    {HOME "/.kube/config", R, POLICY_ALLOW, "rule:~/.kube/**"},
    {HOME "/.kube/config", W, POLICY_DENY, "default:secret:~/.kube"},
    /* protections hold whatever the rules say */
    {HOME "/.config/brokered/settings.json", W, POLICY_DENY, "protected:brokered-settings"},
    {HOME "/.config/brokered/settings.json", R, POLICY_ALLOW, "rule:~/.config/brokered"},
    {HOME "/.config", W, POLICY_DENY, "protected:shell-startup"}, /* ~/.config/fish */
    {HOME "/.config", D, POLICY_DENY, "protected:shell-startup"},
    {HOME "/.config/foo", W, POLICY_ALLOW, "allowlist:~/.config"},
    {HOME "/.bashrc", W, POLICY_DENY, "protected:shell-startup"},
    {STATE "/x", W, POLICY_DENY, "protected:state-dir"},
    {STATE "/x", R, POLICY_ALLOW, "rule:" STATE},
    {WS "/.git/hooks/pre-push", W, POLICY_PROMPT, "git:hook"},
    {WS "/.git/config", W, POLICY_ALLOW, "rule:~/proj/.git"},
    {WS "/.git/objects/x", W, POLICY_ALLOW, "rule:~/proj/.git"},
    /* equal specificity: the stricter decision */
    {WS "/build/out.o", W, POLICY_DENY, "rule:build"},
    {WS "/gen/x.c", W, POLICY_PROMPT, "rule:gen/*"},
    {HOME "/docs/a/b", W, POLICY_PROMPT, "rule:~/docs/**"},
    {HOME "/docs", W, POLICY_PROMPT, "rule:~/docs/**"},
    {WS "/a.txt", W, POLICY_DENY, "rule:?.txt"},
    {WS "/a.txt", M, POLICY_ALLOW, "allowlist:~"},
    {WS "/ab.txt", W, POLICY_ALLOW, "allowlist:~"},
    {WS "/sub/a.txt", W, POLICY_ALLOW, "allowlist:~"},
    {"/opt/x/y/z", W, POLICY_ALLOW, "rule:/opt/x/**/y/**/z"},
    {"/opt/x/1/2/y/3/y/4/z/5", W, POLICY_ALLOW, "rule:/opt/x/**/y/**/z"},
    {"/opt/x/1/2/y/3/y/4/zz", W, POLICY_DENY, "default:read-only"},
    {"/opt/x/z", W, POLICY_DENY, "default:read-only"},
    {"/var/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaab", W, POLICY_ALLOW,
     "rule:/var/*a*a*a*a*a*b"},
    {"/var/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", W, POLICY_DENY,
     "default:read-only"},
};

static void test_rules(void)
{
	struct policy *p = make_policy(rules_json);
	ok(p != NULL, "policy with rules");
	if (!p)
		return;
	run_table(p, "rules", with_rules, ELEMENTSOF(with_rules));

	size_t n = 0;
	const char *const *v = policy_read_restricted(p, &n);
	bool vendor = false, secrets = false, ws = false;
	for (size_t i = 0; i < n; i++) {
		vendor |= strcmp(v[i], WS "/vendor") == 0;
		secrets |= strcmp(v[i], WS "/secrets") == 0;
		ws |= strcmp(v[i], WS) == 0;
	}
	ok(vendor && secrets && !ws, "read-restricted: rule prefixes before the wildcard");

	/* the user approves prompts: grants lift PROMPT, never DENY */
	ok(policy_add_grant(p, WS "/.git/config", W) == 0, "grant .git/config");
	ok(policy_add_grant(p, WS "/gen", W) == 0, "grant gen");
	ok(policy_add_grant(p, HOME "/.bashrc", A) == 0, "grant .bashrc");
	ok(policy_add_grant(p, "relative", W) == -EINVAL, "grant needs an absolute path");
	static const struct check granted[] = {
	    {WS "/.git/config", W, POLICY_ALLOW, "rule:~/proj/.git"},
	    {WS "/.git/config", M, POLICY_ALLOW, "rule:~/proj/.git"},
	    {WS "/gen/x.c", W, POLICY_ALLOW, "grant:user"},
	    {WS "/build/out.o", W, POLICY_DENY, "rule:build"},
	    {HOME "/.bashrc", W, POLICY_DENY, "protected:shell-startup"},
	    {HOME "/docs/a", W, POLICY_PROMPT, "rule:~/docs/**"},
	};
	run_table(p, "granted", granted, ELEMENTSOF(granted));

	/* extra protections from the caller (XDG_CONFIG_HOME, the --settings file) */
	ok(policy_protect(p, "/etc/xdg-conf/brokered", "brokered-settings") == 0, "protect extra");
	ok(policy_protect(p, "rel", "x") == -EINVAL, "protect needs an absolute path");
	static const struct check extra[] = {
	    {"/etc/xdg-conf/brokered/settings.json", W, POLICY_DENY, "protected:brokered-settings"},
	    {HOME "/foo", W, POLICY_ALLOW, "allowlist:~"},
	};
	run_table(p, "extra", extra, ELEMENTSOF(extra));
	policy_free(p);
}

static void test_long_paths(void)
{
	struct policy *p = make_policy(NULL);
	struct strbuf sb = STRBUF_INIT;
	const char *reason = NULL;

	strbuf_appends(&sb, WS);
	while (sb.len < 4000)
		strbuf_appends(&sb, "/abcdefgh");
	ok(policy_check(p, sb.buf, W, &reason) == POLICY_ALLOW, "4000-byte workspace path");
	strbuf_reset(&sb);
	strbuf_appends(&sb, HOME "/.ssh");
	while (sb.len < 4000)
		strbuf_appends(&sb, "/x");
	ok(policy_check(p, sb.buf, R, &reason) == POLICY_DENY, "4000-byte path below ~/.ssh");
	is_str(reason, "default:secret:~/.ssh", "long path reason");
	/* 20000 bytes of "..": normalised, not a crash, and not an escape */
	strbuf_reset(&sb);
	strbuf_appends(&sb, WS);
	while (sb.len < 20000)
		strbuf_appends(&sb, "/..");
	strbuf_appends(&sb, HOME "/.ssh/id_rsa");
	ok(policy_check(p, sb.buf, R, &reason) == POLICY_DENY, "20000 bytes of '..'");
	strbuf_reset(&sb);
	strbuf_appendc(&sb, '/');
	for (int i = 0; i < 5000; i++)
		strbuf_appends(&sb, ".git/");
	strbuf_appends(&sb, "hooks");
	ok(policy_check(p, sb.buf, W, &reason) == POLICY_DENY, "5000 .git components");
	strbuf_free(&sb);
	policy_free(p);
}

static void test_display_and_errors(void)
{
	struct policy *p = make_policy(NULL);
	struct strbuf sb = STRBUF_INIT;
	ok(policy_display_path(p, HOME "//proj/./a/../b", &sb) == 0, "display path");
	is_str(sb.buf, "~/proj/b", "display path: normalised, home as ~");
	ok(policy_display_path(p, "/homeu/x", &sb) == 0, "display path outside home");
	is_str(sb.buf, "/homeu/x", "display path: not home");
	strbuf_free(&sb);
	policy_free(p);

	/* no home: "~" patterns are an error, no secrets, no read checks */
	struct settings *s = NULL;
	struct settings_error se = {0};
	struct policy_error pe = {0};
	const char *j = "{\"sandbox.fileSafety.blocklist\": [\"~/x\"]}";
	settings_new(&s);
	ok(settings_load_buffer(s, "t", j, strlen(j), &se) == 0, "settings with ~ pattern");
	p = NULL;
	is_int(policy_new(s, WS, NULL, NULL, NULL, &p, &pe), -EINVAL, "~ without home refused");
	is_str(pe.message, "pattern \"~/x\" needs a home directory", "~ without home message");
	ok(p == NULL, "no policy on error");
	policy_error_done(&pe);
	settings_free(s);

	ok(policy_new(NULL, WS, NULL, NULL, NULL, &p, &pe) == 0, "policy without home");
	ok(!policy_needs_read_checks(p), "no secrets, no read rules: no read checks");
	const char *reason = NULL;
	ok(policy_check(p, "/root/.ssh/x", R, &reason) == POLICY_ALLOW, "no home: no secrets");
	policy_free(p);
	p = NULL;
	is_int(policy_new(NULL, "rel", NULL, NULL, NULL, &p, &pe), -EINVAL, "relative workspace");
	policy_error_done(&pe);

	unsigned a = 0;
	enum policy_decision d;
	ok(policy_access_from_string("metadata", &a) == 0 && a == M, "access name");
	ok(policy_access_from_string("exec", &a) == -EINVAL, "bad access name");
	ok(policy_decision_from_string("prompt", &d) == 0 && d == POLICY_PROMPT, "decision name");
	ok(policy_decision_from_string("Allow", &d) == -EINVAL, "decision names are exact");
}

int main(void)
{
	test_defaults();
	test_rules();
	test_long_paths();
	test_display_and_errors();
	return tap_done();
}
