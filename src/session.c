/* SPDX-License-Identifier: MIT */
#include "session.h"

#include <errno.h>
#include <stdarg.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "audit.h"
#include "basic/macro.h"
#include "basic/user-util.h"
#include "basic/strbuf.h"
#include "broker.h"
#include "cli.h"
#include "policy.h"
#include "settings.h"
#include "store.h"

_printf_(3, 4) static int set_error(char **ret_error, int r, const char *fmt, ...)
{
	if (ret_error) {
		struct strbuf sb = STRBUF_INIT;
		va_list ap;
		va_start(ap, fmt);
		strbuf_vprintf(&sb, fmt, ap);
		va_end(ap);
		if (r < 0)
			strbuf_printf(&sb, ": %s", strerror(-r));
		*ret_error = strbuf_steal(&sb);
	}
	return r < 0 ? r : -EINVAL;
}

int session_open(const struct session_options *o, struct session **ret, char **ret_error)
{
	struct session *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	int r;
	s->workspace = realpath(o->workspace ? o->workspace : ".", NULL);
	struct stat st;
	if (!s->workspace || stat(s->workspace, &st) < 0 || !S_ISDIR(st.st_mode)) {
		r = set_error(ret_error, -ENOTDIR, "Failed to open the workspace \"%s\"",
			      o->workspace ? o->workspace : ".");
		goto fail;
	}
	/* Real paths, as the policy compares them (a home reached through a symlink too). */
	const char *home = user_home();
	if (home && !(s->home = realpath(home, NULL)) && !(s->home = strdup(home))) {
		r = -ENOMEM;
		goto fail;
	}
	if ((r = settings_new(&s->settings)) < 0)
		goto fail;
	struct settings_error serr = {0};
	r = settings_load_all(s->settings, s->home, getenv("XDG_CONFIG_HOME"), s->workspace,
			      o->settings, &serr);
	if (r < 0) {
		r = set_error(ret_error, 0, "Failed to load settings: %s",
			      serr.message ? serr.message : "invalid");
		settings_error_done(&serr);
		goto fail;
	}
	if ((r = store_state_dir(&s->state_dir)) < 0) {
		set_error(ret_error, r, "Failed to create the state directory");
		goto fail;
	}
	if (o->session) {
		if (!store_id_valid(o->session)) {
			r = set_error(ret_error, 0, "Invalid session id \"%s\"", o->session);
			goto fail;
		}
		s->id = strdup(o->session);
	} else if ((r = cli_default_session_id(s->workspace, &s->id)) < 0) {
		set_error(ret_error, r, "Failed to derive a session id");
		goto fail;
	}
	if (!s->id) {
		r = -ENOMEM;
		goto fail;
	}
	struct policy_error perr = {0};
	r = policy_new(s->settings, s->workspace, o->scratch, s->home, s->state_dir, &s->policy,
		       &perr);
	if (r < 0) {
		r = set_error(ret_error, 0, "Failed to build the policy: %s",
			      perr.message ? perr.message : "invalid");
		policy_error_done(&perr);
		goto fail;
	}
	{
		const char *xdg = getenv("XDG_CONFIG_HOME");
		_cleanup_free_ char *extra = o->settings ? realpath(o->settings, NULL) : NULL;
		struct strbuf sb = STRBUF_INIT;
		if (xdg && xdg[0] == '/')
			strbuf_printf(&sb, "%s/brokered", xdg);
		if ((sb.len && (r = policy_protect(s->policy, sb.buf, "settings")) < 0) ||
		    (extra && (r = policy_protect(s->policy, extra, "settings")) < 0)) {
			strbuf_free(&sb);
			set_error(ret_error, r, "Failed to protect the settings files");
			goto fail;
		}
		strbuf_free(&sb);
	}
	store_set_durable(s->settings->backup_sync);
	if ((r = store_open(s->state_dir, s->id, &s->store)) < 0) {
		set_error(ret_error, r, "Failed to open the backup store of session \"%s\"", s->id);
		goto fail;
	}
	struct strbuf ap = STRBUF_INIT;
	strbuf_printf(&ap, "%s/audit.log", store_session_dir(s->store));
	r = ap.oom ? -ENOMEM
		   : audit_open(ap.buf, s->id, o->tool_call ? o->tool_call : "serve", &s->audit);
	if (r < 0) {
		set_error(ret_error, r, "Failed to open the audit log \"%s\"", ap.buf);
		strbuf_free(&ap);
		goto fail;
	}
	strbuf_free(&ap);
	struct broker_config bc = {
	    .workspace = s->workspace,
	    .scratch = o->scratch,
	    .state_dir = s->state_dir,
	    .home = s->home,
	    .backup_enabled = s->settings->backup_enabled,
	    .kernel_enforces = false, /* no sandbox here: the broker performs everything */
	    .allow_setid = s->settings->allow_setid,
	};
	if ((r = broker_new(&bc, s->audit, NULL, &s->broker)) < 0) {
		set_error(ret_error, r, "Failed to start the broker");
		goto fail;
	}
	broker_set_policy(s->broker, s->policy);
	*ret = s;
	return 0;
fail:
	session_close(s);
	return r;
}

int session_ensure_turn(struct session *s, const char *message)
{
	if (s->turn)
		return 0;
	struct store_options so = {
	    .enabled = s->settings->backup_enabled,
	    .max_size_bytes = s->settings->backup_max_size_mb * 1024 * 1024,
	    .deny_oversize = s->settings->backup_deny_oversize,
	    .sync = s->settings->backup_sync,
	};
	int r = store_turn_join_or_begin(s->store, &so, "serve", message, &s->turn, &s->turn_owned);
	if (r < 0)
		return r;
	broker_set_turn(s->broker, s->turn);
	return 0;
}

int session_finish_turn(struct session *s, const char *message)
{
	if (!s->turn)
		return 0;
	broker_set_turn(s->broker, NULL);
	(void)audit_flush(s->audit);
	struct store_turn *t = TAKE_PTR(s->turn);
	if (s->turn_owned)
		return store_turn_commit(t, message);
	store_turn_free(t);
	return 0;
}

void session_close(struct session *s)
{
	if (!s)
		return;
	if (s->turn)
		(void)session_finish_turn(s, NULL);
	broker_free(s->broker);
	audit_close(s->audit);
	store_close(s->store);
	policy_free(s->policy);
	settings_free(s->settings);
	free(s->id);
	free(s->workspace);
	free(s->state_dir);
	free(s->home);
	free(s);
}
