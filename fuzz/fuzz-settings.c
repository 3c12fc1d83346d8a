/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the settings loader from a buffer, and for the policy built from what it
 * loaded: every pattern is matched against fixed paths and against the patterns themselves used
 * as paths (hostile bytes, wildcards, "..", very long names).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>

#include "basic/strbuf.h"
#include "policy.h"
#include "settings.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fixed[] = {
    "/",
    "/home/u",
    "/home/u/proj/src/a.c",
    "/home/u/.ssh/id_rsa",
    "/home/u/proj/.git/hooks/pre-commit",
    "/home/u/proj/.git/config",
    "/tmp/run/x",
    "/etc/passwd",
    "/home/u/proj/a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t/u/v/w/x/y/z",
};

static void check(const struct policy *p, const char *path)
{
	for (unsigned a = 1; a <= POLICY_ACCESS_ALL; a++) {
		const char *reason = NULL;
		enum policy_decision d = policy_check(p, path, a, &reason);
		if (!reason || d > POLICY_DENY)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct settings *s = NULL;
	struct settings_error e = {0};
	struct policy *p = NULL;
	struct policy_error pe = {0};
	struct strbuf sb = STRBUF_INIT;

	if (settings_new(&s) < 0)
		return 0;
	int r = settings_load_buffer(s, "fuzz.json", (const char *)data, size, &e);
	if (r < 0 && !e.message && r != -ENOMEM)
		abort();
	if (r == 0 && e.message)
		abort();
	if (r == 0 && (s->backup_max_size_mb < SETTINGS_MAX_SIZE_MB_MIN ||
		       s->backup_max_size_mb > SETTINGS_MAX_SIZE_MB_MAX))
		abort();
	if (r == 0 && policy_new(s, "/home/u/proj", "/tmp/run", "/home/u",
				 "/home/u/.local/state/brokered", &p, &pe) == 0) {
		for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
			check(p, fixed[i]);
		for (size_t i = 0; i < s->n_rules && i < 64; i++) {
			strbuf_reset(&sb);
			if (strbuf_printf(&sb, "/home/u/proj/%s", s->rules[i].pattern) == 0)
				check(p, sb.buf);
			check(p, s->rules[i].pattern); /* relative or not */
		}
		/* protections hold whatever the settings say; a hook needs approval unless allowed
		 */
		const char *reason;
		if (policy_check(p, "/home/u/.bashrc", POLICY_ACCESS_WRITE, &reason) !=
			POLICY_DENY ||
		    policy_check(p, "/home/u/proj/.brokered/settings.json", POLICY_ACCESS_WRITE,
				 &reason) != POLICY_DENY ||
		    (policy_check(p, "/home/u/proj/.git/hooks/x", POLICY_ACCESS_WRITE, &reason) ==
			 POLICY_ALLOW &&
		     !s->git_allow_hooks))
			abort();
		policy_free(p);
	}
	strbuf_free(&sb);
	policy_error_done(&pe);
	settings_error_done(&e);
	settings_free(s);
	return 0;
}
