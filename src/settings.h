/* SPDX-License-Identifier: MIT */
/*
 * Settings (DESIGN section 6): JSON files read in order, later wins.
 *
 *   1. $XDG_CONFIG_HOME/brokered/settings.json (default ~/.config/brokered/settings.json)
 *   2. <workspace>/.brokered/settings.json
 *   3. the file of --settings FILE
 *
 * Keys, nested ({"sandbox":{"fileBackup":{"enabled":false}}}) or dotted
 * ({"sandbox.fileBackup.enabled":false}), or any mix:
 *   sandbox.enabled                 bool, default true
 *   sandbox.excludedCommands        [string], default []
 *   sandbox.fileBackup.enabled      bool, default true
 *   sandbox.fileBackup.maxSizeMB    number, clamped to [1, 1024], default 10; the reference's
 *                                   top-level "fileBackupMaxSizeMB" is the same setting. A value
 *                                   that is no number is ignored with a warning; a fraction is
 *                                   rounded down (then clamped).
 *   sandbox.fileBackup.denyOversize bool, default false (ours: deny changes to files over the size)
 *   sandbox.fileBackup.sync         bool, default true: each pre-image reaches stable storage
 *                                   before its change (false: faster, a power loss can lose the
 *                                   newest)
 *   sandbox.allowSetid              bool, default false: files may get set-user-ID/set-group-ID
 *                                   bits (ours: refused by chmod, dropped at creation, otherwise)
 *   sandbox.readOnlyMounts          bool, default false (ours): where brokered may make a mount
 *                                   namespace (root), the command sees every mount read-only but
 *                                   its scratch dir, and the files the broker opens for it stay
 *                                   writable, so their fchmod & co. need no notification (faster;
 *                                   on a file the command opened itself they fail with EROFS)
 *   sandbox.copyOnWrite             bool, default false (ours): where brokered may make a mount
 *                                   namespace and an overlay (root), the command writes the
 *                                   workspace through an overlay, with no notification, and the
 *                                   broker merges its changes when it ends, deciding and backing
 *                                   up each one then (the fastest; see README)
 *   sandbox.deleteMode              "unlink" (default) or "trash": intercepted deletes go to the
 *                                   freedesktop.org trash (ours)
 *   sandbox.git.allowHooks          bool, default false: hooks written inside need no approval
 *   sandbox.git.allowExecConfig     bool, default false: git config keys that name programs need
 *                                   no approval (git-guard.h)
 *   sandbox.fileSafety.allowlist    [pattern]: {path, write+delete+metadata, allow}
 *   sandbox.fileSafety.blocklist    [pattern]: {path, all, deny}
 *   sandbox.fileSafety.rules        [{"path": pattern, "access": "all" | name | [names],
 *                                     "decision": "allow" | "deny" | "prompt"}]
 *                                   access names: read, write, delete, metadata; default "all"
 *   sandbox.network.mode            "allow" (default), "deny" (no IP traffic) or "proxy" (only
 *                                   through brokered's proxy, by host name)
 *   sandbox.network.allowedDomains  [name]: host names the proxy lets through ("example.com",
 *                                   "*.example.com" for its subdomains, an IP literal as written)
 *   sandbox.network.deniedDomains   [name]: never let through, whatever allowedDomains says
 *   sandbox.network.allowLocalhost  bool, default false: loopback addresses stay reachable
 *                                   directly in "deny" and "proxy" modes
 *   sandbox.network.allowUnixSockets [pattern]: Unix sockets outside the workspace and the
 *                                   scratch dir that may be connected to (patterns as for files)
 *
 * Merging: a scalar set by a later file replaces the earlier value; lists (excludedCommands and
 * all rules) are concatenated in file order. Within one file a scalar may be set only once
 * (nested and dotted spelling of the same key count as the same key): that is an error.
 *
 * Files are "JSON with comments": // and block comments and trailing commas are accepted. A file
 * is refused if it is not a regular file, is writable by group or others, is owned by someone
 * other than the caller or root, is over 1 MiB, does not parse ("FILE:LINE:COL: reason"), or has
 * a value of the wrong type ("FILE: sandbox.enabled: expected boolean, got string"). Unknown keys
 * are not errors; each gives a warning in settings.warnings. A refused file changes nothing.
 *
 * Note for callers: the workspace file comes with the workspace (a cloned repository) and can
 * loosen the policy (sandbox.enabled=false, excludedCommands, allow rules); show the user what it
 * changed, or trust it only for trusted workspaces.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "policy.h"

#define SETTINGS_FILE_MAX	     (1024 * 1024)
#define SETTINGS_MAX_SIZE_MB_MIN     1
#define SETTINGS_MAX_SIZE_MB_MAX     1024
#define SETTINGS_MAX_SIZE_MB_DEFAULT 10

struct settings_rule {
	char *pattern;	 /* as written: "~/.ssh", "build", "/etc/hosts" */
	unsigned access; /* POLICY_ACCESS_* */
	enum policy_decision decision;
	const char *source; /* "rule", "allowlist" or "blocklist" (static) */
};

enum settings_net_mode {
	SETTINGS_NET_ALLOW,
	SETTINGS_NET_DENY,
	SETTINGS_NET_PROXY,
};

struct settings {
	bool sandbox_enabled;
	char **excluded_commands;
	size_t n_excluded_commands;
	bool backup_enabled;
	uint64_t backup_max_size_mb; /* already clamped */
	bool backup_deny_oversize;
	bool delete_to_trash;	    /* sandbox.deleteMode: "trash" */
	bool backup_sync;	    /* sandbox.fileBackup.sync, default true */
	bool allow_setid;	    /* sandbox.allowSetid, default false */
	bool read_only_mounts;	    /* sandbox.readOnlyMounts, default false */
	bool copy_on_write;	    /* sandbox.copyOnWrite, default false */
	bool git_allow_hooks;	    /* sandbox.git.allowHooks, default false */
	bool git_allow_exec_config; /* sandbox.git.allowExecConfig, default false */
	enum settings_net_mode net_mode;
	bool net_allow_localhost;
	char **net_allowed_domains; /* lists of all files, concatenated */
	size_t n_net_allowed_domains;
	char **net_denied_domains;
	size_t n_net_denied_domains;
	char **net_unix_sockets;
	size_t n_net_unix_sockets;
	struct settings_rule *rules; /* in precedence order: later entries win ties */
	size_t n_rules;
	char **warnings; /* "FILE: unknown key \"sandbox.foo\"", ... for the caller to print */
	size_t n_warnings;
};

struct settings_error {
	char *message; /* malloc'd "FILE:LINE:COL: reason" or "FILE: KEY: reason"; NULL if none */
};
void settings_error_done(struct settings_error *e);

/* Defaults. */
int settings_new(struct settings **ret);
void settings_free(struct settings *s);

/*
 * Merge one settings document into s; name is used in messages. On failure s is unchanged and
 * err->message says why (-EINVAL: syntax or type; -E2BIG; -ENOMEM).
 */
int settings_load_buffer(struct settings *s, const char *name, const char *buf, size_t n,
			 struct settings_error *err);
/* Read, check (owner, mode, type, size) and merge one file. -ENOENT if it does not exist. */
int settings_load_file(struct settings *s, const char *path, struct settings_error *err);

/* $XDG_CONFIG_HOME/brokered/settings.json, or home/.config/...; xdg may be NULL or "" (unset). */
int settings_user_file(const char *home, const char *xdg_config_home, char **ret);
/* <workspace>/.brokered/settings.json */
int settings_workspace_file(const char *workspace, char **ret);

/*
 * The whole chain: user file, workspace file (both optional), then extra (may be NULL; if given,
 * it must exist). Stops at the first refused file.
 */
int settings_load_all(struct settings *s, const char *home, const char *xdg_config_home,
		      const char *workspace, const char *extra, struct settings_error *err);
