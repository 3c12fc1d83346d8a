/* SPDX-License-Identifier: MIT */
/*
 * Path policy (DESIGN section 6, the reference's fileSafety): which accesses to which real paths
 * the broker grants, denies, or leaves to the user. Pure logic: no file system access, no logging.
 *
 * Evaluation of one access bit on a path, first match wins:
 *  1. protections, which no settings file can lift (write, delete, metadata only; reads pass):
 *     DENY  protected:shell-startup     ~/.bashrc ~/.bash_profile ~/.bash_login ~/.bash_logout
 *                                       ~/.profile ~/.zshrc ~/.zprofile ~/.zshenv ~/.zlogin
 *                                       ~/.zlogout ~/.config/fish
 *     DENY  protected:brokered-settings ~/.config/brokered, <workspace>/.brokered, and whatever
 *                                       the caller adds with policy_protect() (XDG_CONFIG_HOME,
 *                                       the --settings file)
 *     DENY  protected:state-dir         the state dir (backup store, audit log)
 *           A write/delete of an *ancestor* of one of these is refused too: renaming a prepared
 *           tree onto ~/.config would otherwise replace ~/.config/brokered in one step.
 *     PROMPT git:hook                   files in .git/hooks and .git/modules/.../hooks, anywhere
 *                                       except in the scratch dir (write, metadata; delete is
 *                                       allowed: removing a hook cannot run code); a grant lifts
 *                                       it, and sandbox.git.allowHooks turns it off. The hooks
 *                                       directory itself and inert "*.sample" files may be
 *                                       created, so that `git init` and `git clone` work.
 *           .git/config is writable like any workspace file (and backed up): git init, clone,
 *           remote add and push -u write it. Keys in it that name programs are judged when the
 *           command ends (git-guard.h).
 *  2. the most specific user rule covering the bit (rules, allowlist, blocklist from settings);
 *     the built-in secrets compete with the user rules on specificity (a user rule must be at
 *     least as specific as the secret to override it: allowlisting "~" does not open ~/.ssh);
 *  3. defaults: secrets DENY for every access; scratch dir ALLOW; workspace ALLOW;
 *     everything else ALLOW for read, DENY for write/delete/metadata.
 * Secrets (default:secret): ~/.ssh ~/.gnupg ~/.aws ~/.azure ~/.kube ~/.docker/config.json
 * ~/.config/gh ~/.config/gcloud ~/.config/hub ~/.netrc ~/.git-credentials ~/.password-store
 * ~/.npmrc ~/.pypirc ~/.cargo/credentials ~/.cargo/credentials.toml ~/.gem/credentials
 * ~/.local/share/keyrings ~/.pki ~/.mozilla ~/.config/google-chrome ~/.config/chromium.
 *
 * Specificity of a rule: the length of its pattern (absolute, normalised) up to the first
 * wildcard, without a trailing '/'. Equal specificity: DENY beats PROMPT beats ALLOW; same
 * decision: the later rule (later file) names the reason.
 *
 * Patterns: "~" or "~/..." is the home directory; a relative pattern is relative to the workspace;
 * "*" matches within one component, "?" one byte but '/', a component "**" any number of
 * components (zero included); "**" inside a component acts as "*". There is no escape: '*' and
 * '?' are always wildcards. A pattern covers the paths it matches and everything below them
 * (directory semantics), so "~/.ssh" and "~/.ssh" followed by a "**" component are one rule.
 * Patterns are normalised lexically like paths: "//", "." and ".." collapse (a ".." right after
 * a wildcard component cancels that component), and a trailing '/' is dropped.
 *
 * BSD sed's temporary names (".!<PID>!file") are not mapped to "file": no Linux sed makes them
 * (GNU sed uses "sedXXXXXX", busybox "file.XXXXXX"), the name carries no target on Linux anyway,
 * and mapping names would let a created file borrow another file's rule. The broker takes the
 * backup when the rename lands on the target, which is checked under the target's own name.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "basic/strbuf.h"

enum policy_access {
	POLICY_ACCESS_READ = 1u << 0,
	POLICY_ACCESS_WRITE = 1u << 1,	  /* create, modify content, rename onto, link/symlink at */
	POLICY_ACCESS_DELETE = 1u << 2,	  /* unlink, rmdir, rename away */
	POLICY_ACCESS_METADATA = 1u << 3, /* chmod, chown, utimes, xattrs */
	POLICY_ACCESS_ALL = (1u << 4) - 1,
	POLICY_ACCESS_MODIFY = POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE | POLICY_ACCESS_METADATA,
};

/* Ordered by strictness: combining accesses keeps the largest. */
enum policy_decision {
	POLICY_ALLOW = 0,
	POLICY_PROMPT = 1,
	POLICY_DENY = 2,
};

const char *policy_decision_name(enum policy_decision d); /* "allow", "prompt", "deny" */
int policy_decision_from_string(const char *s, enum policy_decision *ret);
/* "read", "write", "delete", "metadata" → one bit; "all" → POLICY_ACCESS_ALL. */
int policy_access_from_string(const char *s, unsigned *ret);

struct policy_error {
	char *message; /* malloc'd, NULL when there is none */
};
void policy_error_done(struct policy_error *e);

struct settings;
struct policy;

/*
 * Build the policy of one run. workspace, scratch, home and state_dir are absolute (they are
 * normalised here); scratch, home and state_dir may be NULL (no such default, and "~" patterns
 * are then an error). settings may be NULL (defaults only). err may be NULL.
 */
int policy_new(const struct settings *settings, const char *workspace, const char *scratch,
	       const char *home, const char *state_dir, struct policy **ret,
	       struct policy_error *err);
void policy_free(struct policy *p);

/* One more never-writable prefix (absolute), reported as "protected:<name>". */
int policy_protect(struct policy *p, const char *path, const char *name);
/*
 * The user approved a prompt: accesses on this exact path (and below it) that the policy would
 * PROMPT for become ALLOW ("grant:user"). Never lifts a DENY.
 */
int policy_add_grant(struct policy *p, const char *path, unsigned access);
/* Did the user grant every bit of access on path (policy_add_grant on it or an ancestor)? */
bool policy_granted(const struct policy *p, const char *path, unsigned access);

/*
 * Decide accesses (a mask of POLICY_ACCESS_*) on an absolute real path: the strictest decision of
 * the requested bits. *ret_reason (may be NULL) names what decided, e.g. "default:workspace",
 * "blocklist:~/.npmrc", "protected:shell-startup"; it is owned by the policy (or static) and may
 * contain any byte of a pattern, so escape it for a log. A relative path, or an empty access
 * mask, is DENY ("error:..."); a path that is not normalised is normalised first.
 */
enum policy_decision policy_check(const struct policy *p, const char *real_path, unsigned access,
				  const char **ret_reason);

/*
 * Does pattern (a settings pattern: "~/...", relative to the workspace, wildcards as above) match
 * the absolute real path or one of its ancestors? 1 or 0, -errno for a pattern that cannot be
 * expanded. For lists outside fileSafety (sandbox.network.allowUnixSockets).
 */
int policy_pattern_matches(const struct policy *p, const char *pattern, const char *real_path);

/* The path as the audit log shows it (normalisedPath=): "//", ".", ".." collapsed, home as "~". */
int policy_display_path(const struct policy *p, const char *path, struct strbuf *out);

/*
 * Absolute, normalised prefixes outside which every read is allowed: the subtrees that hold a
 * read-denied (or read-prompt) secret or rule. For a wildcard pattern it is the directory before
 * the first wildcard, so the list is a superset; a Landlock ruleset built around it must still
 * ask policy_check() inside. Owned by the policy; no entry lies below another.
 */
const char *const *policy_read_restricted(const struct policy *p, size_t *ret_n);
/* Does every rule decide metadata changes as it decides writes? (Then a file open for writing
 * may have its metadata changed through that fd without asking: sandbox.readOnlyMounts.) */
bool policy_metadata_follows_write(const struct policy *p);
/*
 * Can the command write through a copy-on-write overlay of the workspace (sandbox.copyOnWrite),
 * with the policy decided when the changes are merged? NULL if so, else why not: a rule allows
 * writes outside the workspace (there the command could then write nothing at all), or the
 * workspace holds a path whose reads are restricted (Landlock's rules would not reach the
 * overlay's files).
 */
const char *policy_copy_on_write_blocker(const struct policy *p);
/* False when no read can be refused (no secrets, no read rules): reads need no check at all. */
bool policy_needs_read_checks(const struct policy *p);
