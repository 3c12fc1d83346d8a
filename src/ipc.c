/* SPDX-License-Identifier: MIT */
#include "ipc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "basic/macro.h"
#include "basic/socket-util.h"
#include "basic/strbuf.h"
#include "broker.h"
#include "ipc-proto.h"
#include "store.h"

#define ACCEPT_BATCH	64 /* connections accepted per round, so that serving is not starved */
#define READ_CHUNK	65536
#define OUT_MSGS_MAX	4096 /* queued answers per connection (a hard stop; see PENDING_MAX) */
#define PENDING_MAX	64   /* unsent answers after which a connection's requests wait */
#define ACCEPT_PAUSE_MS 100  /* out of fds: stop accepting for a moment instead of spinning */

struct out_msg {
	char *data;
	size_t len, off;
	int fd; /* sent with the first byte, then closed; -1 if none */
};

struct conn {
	int fd;
	pid_t pid;
	char *in;
	size_t in_len;
	bool discarding; /* an overlong line is being skipped up to its '\n' */
	struct out_msg *out;
	size_t n_out, out_bytes;
	bool closing; /* close once the answers are out */
	bool eof;     /* the peer shut its side: serve what is complete, answer, close */
	uint64_t last_ms;
	double tokens; /* rate limit: token bucket */
	uint64_t refill_ms;
	bool throttled;
};

struct ipc_server {
	char *path, *dir;
	bool made_dir;
	char *session;
	struct audit *audit;
	struct broker *broker;
	struct ipc_session_ops ops;
	unsigned max_clients, rate, idle_ms;
	int listen_fd;
	struct conn **conns;
	size_t n_conns;
	/* What the last ipc_server_pollfds() returned, to map pollfds back. */
	struct conn **polled;
	size_t n_polled;
	bool polled_listener;
	uint64_t accept_paused_until;
	struct ipc_stats stats;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- paths ---- */

int ipc_socket_dir(const char *session_id, char **ret)
{
	if (!session_id || !store_id_valid(session_id))
		return -EINVAL;
	const char *rt = getenv("XDG_RUNTIME_DIR");
	struct strbuf sb = STRBUF_INIT;
	struct stat st;
	if (rt && rt[0] == '/' && stat(rt, &st) == 0 && S_ISDIR(st.st_mode) &&
	    st.st_uid == getuid() && access(rt, W_OK) == 0)
		strbuf_printf(&sb, "%s/brokered/%s", rt, session_id);
	else
		strbuf_printf(&sb, "/tmp/brokered-%u/%s", (unsigned)getuid(), session_id);
	char *p = strbuf_steal(&sb);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

static int socket_in_dir(const char *session_id, const char *name, char **ret)
{
	_cleanup_free_ char *dir = NULL;
	int r = ipc_socket_dir(session_id, &dir);
	if (r < 0)
		return r;
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s/%s", dir, name);
	char *p = strbuf_steal(&sb);
	if (!p)
		return -ENOMEM;
	*ret = p;
	return 0;
}

int ipc_default_socket_path(const char *session_id, char **ret)
{
	return socket_in_dir(session_id, "broker.sock", ret);
}

int ipc_run_socket_path(const char *session_id, char **ret)
{
	char name[64];
	snprintf(name, sizeof name, "run-%d.sock", (int)getpid());
	return socket_in_dir(session_id, name, ret);
}

/* A directory that is ours and closed to others (0700); created, parents too, if missing. */
static int private_dir(const char *dir, bool *ret_made)
{
	*ret_made = false;
	_cleanup_free_ char *p = strdup(dir);
	if (!p)
		return -ENOMEM;
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0700) == 0) {
			if (!c)
				*ret_made = true;
		} else if (errno != EEXIST) {
			return negative_errno();
		}
		*s = c;
		if (!c)
			break;
	}
	struct stat st;
	if (lstat(dir, &st) < 0)
		return negative_errno();
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	/* Never loosen or tighten a directory we did not make (think --socket /tmp/x.sock as
	 * root): one that others can enter is refused instead. */
	if (st.st_uid != geteuid() || (st.st_mode & 077))
		return -EPERM;
	return 0;
}

static int fill_addr(const char *path, struct sockaddr_un *sa)
{
	*sa = (struct sockaddr_un){.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa->sun_path)
		return -ENAMETOOLONG;
	memcpy(sa->sun_path, path, strlen(path) + 1);
	return 0;
}

/* ---- server ---- */

int ipc_server_new(const struct ipc_config *cfg, struct broker *b, struct ipc_server **ret)
{
	if (!cfg->session_id || !store_id_valid(cfg->session_id) || !b)
		return -EINVAL;
	struct ipc_server *s = calloc(1, sizeof *s);
	if (!s)
		return -ENOMEM;
	s->listen_fd = -1;
	s->broker = b;
	s->audit = cfg->audit;
	s->ops = cfg->ops;
	s->max_clients = cfg->max_clients ? cfg->max_clients : IPC_MAX_CLIENTS_DEFAULT;
	s->rate = cfg->rate ? cfg->rate : IPC_RATE_DEFAULT;
	s->idle_ms = cfg->idle_timeout_ms ? cfg->idle_timeout_ms : IPC_IDLE_TIMEOUT_DEFAULT;
	int r = -ENOMEM;
	if (!(s->session = strdup(cfg->session_id)))
		goto fail;
	if (cfg->socket_path)
		s->path = strdup(cfg->socket_path);
	else if ((r = ipc_default_socket_path(cfg->session_id, &s->path)) < 0)
		goto fail;
	r = -ENOMEM;
	if (!s->path)
		goto fail;
	r = -EINVAL;
	if (s->path[0] != '/')
		goto fail;
	s->dir = strdup(s->path);
	if (!s->dir) {
		r = -ENOMEM;
		goto fail;
	}
	*strrchr(s->dir, '/') = '\0';
	if (!*s->dir) {
		r = -EINVAL;
		goto fail;
	}
	if ((r = private_dir(s->dir, &s->made_dir)) < 0)
		goto fail;

	struct sockaddr_un sa;
	if ((r = fill_addr(s->path, &sa)) < 0)
		goto fail;
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0) {
		r = negative_errno();
		goto fail;
	}
	/* A live broker already there wins; a stale socket from a killed one is replaced. */
	struct stat st;
	if (lstat(s->path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			r = -EEXIST;
			goto fail;
		}
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		bool live = probe >= 0 && (connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0 ||
					   errno == EAGAIN);
		safe_close(probe);
		if (live) {
			r = -EADDRINUSE;
			goto fail;
		}
		(void)unlink(s->path);
	}
	mode_t old = umask(0177);
	int k = bind(s->listen_fd, (struct sockaddr *)&sa, sizeof sa);
	umask(old);
	if (k < 0 || chmod(s->path, 0600) < 0 || listen(s->listen_fd, 128) < 0) {
		r = negative_errno();
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	if (s->listen_fd >= 0 && r != -EADDRINUSE && r != -EEXIST) {
		/* only remove what we bound */
		struct stat st2;
		if (stat(s->path, &st2) == 0 && S_ISSOCK(st2.st_mode)) {
			struct sockaddr_un me;
			socklen_t len = sizeof me;
			if (getsockname(s->listen_fd, (struct sockaddr *)&me, &len) == 0 &&
			    len > sizeof(sa_family_t))
				(void)unlink(s->path);
		}
	}
	safe_close(s->listen_fd);
	if (s->made_dir && s->dir)
		(void)rmdir(s->dir);
	free(s->path);
	free(s->dir);
	free(s->session);
	free(s);
	return r;
}

const char *ipc_server_path(const struct ipc_server *s)
{
	return s->path;
}

static void conn_free(struct conn *c)
{
	if (!c)
		return;
	safe_close(c->fd);
	for (size_t i = 0; i < c->n_out; i++) {
		free(c->out[i].data);
		safe_close(c->out[i].fd);
	}
	free(c->out);
	free(c->in);
	free(c);
}

void ipc_server_free(struct ipc_server *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n_conns; i++)
		conn_free(s->conns[i]);
	free(s->conns);
	free(s->polled);
	if (s->listen_fd >= 0) {
		safe_close(s->listen_fd);
		(void)unlink(s->path);
	}
	if (s->made_dir)
		(void)rmdir(s->dir); /* fails, as it should, if others still use it */
	free(s->path);
	free(s->dir);
	free(s->session);
	free(s);
}

void ipc_server_stats(const struct ipc_server *s, struct ipc_stats *ret)
{
	*ret = s->stats;
	ret->clients = (unsigned)s->n_conns;
}

int ipc_attach_env(const struct ipc_server *s, const char *tool_call)
{
	if (setenv("BROKERED_IPC_ADDRESS", s->path, 1) < 0 ||
	    setenv("BROKERED_SESSION_ID", s->session, 1) < 0 ||
	    (tool_call && setenv("BROKERED_TOOL_CALL_ID", tool_call, 1) < 0))
		return negative_errno();
	return 0;
}

/* ---- answers ---- */

static int queue(struct conn *c, const char *data, size_t len, int fd)
{
	if (c->n_out >= OUT_MSGS_MAX) {
		safe_close(fd);
		c->closing = true; /* a peer that never reads: give up on it */
		return -ENOBUFS;
	}
	struct out_msg *n = realloc(c->out, (c->n_out + 1) * sizeof *n);
	if (!n) {
		safe_close(fd);
		return -ENOMEM;
	}
	c->out = n;
	char *d = malloc(len);
	if (!d) {
		safe_close(fd);
		return -ENOMEM;
	}
	memcpy(d, data, len);
	n[c->n_out++] = (struct out_msg){.data = d, .len = len, .fd = fd};
	c->out_bytes += len;
	return 0;
}

/* Write what the peer takes now; never blocks. */
static int flush_out(struct ipc_server *s, struct conn *c)
{
	while (c->n_out) {
		struct out_msg *m = &c->out[0];
		ssize_t k = send_with_fd(c->fd, m->data + m->off, m->len - m->off, m->fd,
					 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k == -EINTR)
			continue;
		if (k == -EAGAIN)
			return 0;
		if (k < 0)
			return (int)k;
		if (m->fd >= 0) {
			m->fd = safe_close(m->fd); /* the peer holds it now */
			s->stats.fds_sent++;
		}
		m->off += (size_t)k;
		c->out_bytes -= (size_t)k;
		c->last_ms = now_ms();
		if (m->off == m->len) {
			free(m->data);
			memmove(c->out, c->out + 1, (c->n_out - 1) * sizeof *c->out);
			c->n_out--;
		}
	}
	return 0;
}

static void audit_refusal(struct ipc_server *s, const struct conn *c, const char *proto,
			  const char *reason, const char *path)
{
	s->stats.errors++;
	if (!s->audit)
		return;
	struct strbuf extra = STRBUF_INIT;
	strbuf_printf(&extra, "door=ipc proto=%s reason=", proto);
	for (const char *p = reason; *p; p++) /* static reasons: spaces only need escaping */
		strbuf_appends(&extra, *p == ' ' ? "\\x20" : (char[2]){*p, 0});
	struct audit_record rec = {
	    .phase = "ipc-error",
	    .op = "-",
	    .path = path,
	    .decision = "deny",
	    .result = "EINVAL",
	    .extra = extra.oom ? NULL : extra.buf,
	    .pid = c->pid,
	};
	audit_log(s->audit, &rec);
	strbuf_free(&extra);
}

static void json_answer(struct conn *c, const struct ipc_json_resp *resp)
{
	struct strbuf sb = STRBUF_INIT;
	if (ipc_format_json_resp(&sb, resp) >= 0)
		(void)queue(c, sb.buf, sb.len, -1);
	else
		(void)queue(c, "{\"ok\":false,\"error\":\"out of memory\"}\n", 37, -1);
	strbuf_free(&sb);
}

static const char *errno_text(int r)
{
	switch (-r) {
	case EACCES:
		return "EACCES: denied by policy";
	case EPERM:
		return "EPERM: not permitted";
	case ENOENT:
		return "ENOENT: no such file or directory";
	case EEXIST:
		return "EEXIST: file exists";
	case ENOTDIR:
		return "ENOTDIR: not a directory";
	case EISDIR:
		return "EISDIR: is a directory";
	case ENOTEMPTY:
		return "ENOTEMPTY: directory not empty";
	case EXDEV:
		return "EXDEV: no trash on that file system";
	case EINVAL:
		return "EINVAL: invalid request";
	case ELOOP:
		return "ELOOP: too many levels of symbolic links or too deep";
	case E2BIG:
		return "E2BIG: tree too large";
	case ENAMETOOLONG:
		return "ENAMETOOLONG: name too long";
	case ENOSPC:
		return "ENOSPC: no space left (no backup, nothing changed)";
	case EIO:
		return "EIO: input/output error";
	case EAGAIN:
		return "EAGAIN: try again";
	case EBUSY:
		return "EBUSY: busy";
	case EOPNOTSUPP:
		return "EOPNOTSUPP: not supported";
	default:
		return "error";
	}
}

/* ---- requests ---- */

static void serve_token(struct ipc_server *s, struct conn *c, const char *line, size_t n)
{
	struct ipc_token_req q;
	const char *reason = NULL;
	int r = ipc_parse_token(line, n, &q, &reason);
	if (r < 0) {
		audit_refusal(s, c, "text", reason ? reason : "malformed", q.path);
		(void)queue(c, "DENY\n", 5, -1);
		ipc_token_req_done(&q);
		return;
	}
	if (strcmp(q.session, s->session) != 0) {
		audit_refusal(s, c, "text", "session id mismatch", q.path);
		(void)queue(c, "DENY\n", 5, -1);
		ipc_token_req_done(&q);
		return;
	}
	struct broker_ipc_ctx ctx = {.pid = c->pid, .tool_call = q.tool_call};
	struct broker_ipc_result res;
	broker_ipc_token(s->broker, &ctx, q.path, q.write, q.flags, (mode_t)q.mode, &res);
	if (res.error >= 0 && res.fd >= 0) {
		(void)queue(c, "FD\n", 3, TAKE_FD(res.fd));
	} else if (res.error >= 0 && res.decision == BROKER_IPC_SANDBOX) {
		(void)queue(c, "SANDBOX\n", 8, -1);
	} else {
		(void)queue(c, "DENY\n", 5, -1);
	}
	broker_ipc_result_done(&res);
	ipc_token_req_done(&q);
}

static enum broker_host_kind host_kind(enum ipc_operation op)
{
	switch (op) {
	case IPC_OP_MKDIR:
		return BROKER_HOST_MKDIR;
	case IPC_OP_RENAME:
		return BROKER_HOST_RENAME;
	case IPC_OP_COPY:
		return BROKER_HOST_COPY;
	case IPC_OP_CHMOD:
		return BROKER_HOST_CHMOD;
	case IPC_OP_LINK:
		return BROKER_HOST_LINK;
	case IPC_OP_TOUCH:
		return BROKER_HOST_TOUCH;
	case IPC_OP_DELETE:
	case IPC_OP_NONE:
	default:
		return BROKER_HOST_DELETE;
	}
}

static void serve_json(struct ipc_server *s, struct conn *c, const char *line, size_t n)
{
	struct ipc_json_req q;
	const char *reason = NULL;
	int r = ipc_parse_json(line, n, &q, &reason);
	const char *opname = q.op ? ipc_operation_name(q.op) : ipc_command_name(q.command);
	struct ipc_json_resp resp = {.id = q.id, .operation = opname, .path = q.path, .to = q.to};
	if (r < 0) {
		audit_refusal(s, c, "json", reason ? reason : "malformed", q.path);
		resp.error = reason ? reason : "malformed request";
		json_answer(c, &resp);
		ipc_json_req_done(&q);
		return;
	}
	if (strcmp(q.session, s->session) != 0) {
		audit_refusal(s, c, "json", "session id mismatch", q.path);
		resp.error = "session id mismatch";
		resp.decision = "deny";
		json_answer(c, &resp);
		ipc_json_req_done(&q);
		return;
	}

	struct broker_ipc_ctx ctx = {.pid = c->pid, .tool_call = q.tool_call, .trace = q.trace};
	_cleanup_free_ char *turn = NULL;
	struct broker_ipc_result res = BROKER_IPC_RESULT_INIT;
	switch (q.command) {
	case IPC_CMD_ENABLE_MODIFY_BACKUP:
		if (s->ops.enable_backup) {
			r = s->ops.enable_backup(s->ops.userdata, &q, &turn);
		} else {
			struct store_turn *t = broker_get_turn(s->broker);
			r = t ? 0 : -EOPNOTSUPP;
			if (t && !(turn = strdup(store_turn_id(t))))
				r = -ENOMEM;
		}
		resp.ok = r >= 0;
		resp.turn = turn;
		resp.error = r == -EOPNOTSUPP ? "backup is disabled in this broker" : errno_text(r);
		break;
	case IPC_CMD_COMMIT_MODIFY_BACKUP:
		if (s->ops.commit_backup)
			r = s->ops.commit_backup(s->ops.userdata, &q, &turn);
		else
			r = -EOPNOTSUPP;
		resp.ok = r >= 0;
		resp.turn = turn;
		resp.error = r == -EOPNOTSUPP ? "this broker commits its turn when its command ends"
					      : errno_text(r);
		break;
	case IPC_CMD_MODIFY_BACKUP:
	case IPC_CMD_HOST_FILE_OPERATION: {
		struct broker_host_op op = {
		    .kind = q.command == IPC_CMD_MODIFY_BACKUP ? BROKER_HOST_MODIFY_BACKUP
							       : host_kind(q.op),
		    .path = q.path,
		    .to = q.to,
		    .recursive = q.recursive,
		    .force = q.force,
		    .symbolic = q.symbolic,
		    .delete_mode = q.delete_mode == IPC_DELETE_TRASH	? BROKER_DELETE_TRASH
				   : q.delete_mode == IPC_DELETE_UNLINK ? BROKER_DELETE_UNLINK
									: BROKER_DELETE_DEFAULT,
		    .has_mode = q.has_mode,
		    .mode = (mode_t)q.mode,
		    .report_path = q.report_path,
		};
		broker_ipc_host_op(s->broker, &ctx, &op, &res);
		resp.ok = res.error >= 0;
		resp.normalised_path = res.real;
		resp.normalised_to = res.real_to;
		resp.decision = broker_ipc_decision_name(res.decision);
		resp.error = errno_text(res.error);
		resp.backup = res.backup;
		break;
	}
	case IPC_CMD_INVALID:
	default:
		resp.error = "unknown command";
		break;
	}
	json_answer(c, &resp);
	broker_ipc_result_done(&res);
	ipc_json_req_done(&q);
}

static void serve_line(struct ipc_server *s, struct conn *c, const char *line, size_t n)
{
	s->stats.requests++;
	if (ipc_line_is_json(line, n))
		serve_json(s, c, line, n);
	else
		serve_token(s, c, line, n);
}

static void refill(struct ipc_server *s, struct conn *c, uint64_t t)
{
	if (t > c->refill_ms) {
		c->tokens += (double)(t - c->refill_ms) * s->rate / 1000.0;
		if (c->tokens > s->rate)
			c->tokens = s->rate;
		c->refill_ms = t;
	}
}

/* An answer with an fd not yet sent: fds are a scarce resource, never queue a second one. */
static bool fd_pending(const struct conn *c)
{
	for (size_t i = 0; i < c->n_out; i++)
		if (c->out[i].fd >= 0)
			return true;
	return false;
}

/* Serve the complete lines in the buffer, as far as the rate and the answer queue allow. */
static void serve_buffer(struct ipc_server *s, struct conn *c)
{
	size_t start = 0;
	uint64_t t = now_ms();
	c->throttled = false;
	while (start < c->in_len && !c->closing) {
		char *nl = memchr(c->in + start, '\n', c->in_len - start);
		if (!nl)
			break;
		size_t len = (size_t)(nl - (c->in + start));
		if (c->discarding) {
			c->discarding = false;
			start += len + 1;
			continue;
		}
		if (c->out_bytes >= IPC_OUT_MAX || c->n_out >= PENDING_MAX || fd_pending(c))
			break; /* the peer is not reading its answers (or an fd waits): wait */
		refill(s, c, t);
		if (c->tokens < 1) {
			c->throttled = true;
			s->stats.throttled++;
			break;
		}
		c->tokens -= 1;
		serve_line(s, c, c->in + start, len);
		start += len + 1;
		c->last_ms = now_ms();
	}
	if (start) {
		memmove(c->in, c->in + start, c->in_len - start);
		c->in_len -= start;
	}
	/* A full buffer without a newline: the line is too long. Answer once, skip to its end. */
	if (c->in_len > IPC_LINE_MAX && !memchr(c->in, '\n', c->in_len)) {
		bool json = ipc_line_is_json(c->in, c->in_len);
		audit_refusal(s, c, json ? "json" : "text", "line too long", NULL);
		if (json)
			json_answer(c, &(struct ipc_json_resp){.error = "line too long"});
		else
			(void)queue(c, "DENY\n", 5, -1);
		c->in_len = 0;
		c->discarding = true;
	}
}

static void conn_read(struct ipc_server *s, struct conn *c)
{
	size_t cap = IPC_LINE_MAX + 1 + READ_CHUNK;
	if (!c->in && !(c->in = malloc(cap))) {
		c->closing = true;
		return;
	}
	for (int rounds = 0; rounds < 4 && c->in_len < cap; rounds++) {
		ssize_t k = recv(c->fd, c->in + c->in_len, cap - c->in_len, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			break;
		if (k <= 0) {
			c->eof = true;
			break;
		}
		c->in_len += (size_t)k;
		c->last_ms = now_ms();
		if (c->discarding) {
			char *nl = memchr(c->in, '\n', c->in_len);
			if (!nl) {
				c->in_len = 0;
				continue;
			}
			size_t skip = (size_t)(nl - c->in) + 1;
			memmove(c->in, nl + 1, c->in_len - skip);
			c->in_len -= skip;
			c->discarding = false;
		}
		serve_buffer(s, c);
		if (c->throttled || c->closing || c->out_bytes >= IPC_OUT_MAX)
			break;
	}
}

static bool has_line(const struct conn *c)
{
	return c->in_len && memchr(c->in, '\n', c->in_len);
}

/* Complete lines that can be served now (nothing holds them back). */
static bool ready(const struct conn *c)
{
	return !c->closing && !c->throttled && has_line(c) && c->n_out < PENDING_MAX &&
	       c->out_bytes < IPC_OUT_MAX && !fd_pending(c);
}

static void drop_out(struct conn *c)
{
	for (size_t j = 0; j < c->n_out; j++) {
		free(c->out[j].data);
		safe_close(c->out[j].fd);
	}
	c->n_out = 0;
	c->out_bytes = 0;
}

static void accept_some(struct ipc_server *s)
{
	for (int i = 0; i < ACCEPT_BATCH && s->n_conns < s->max_clients; i++) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM)
				s->accept_paused_until = now_ms() + ACCEPT_PAUSE_MS;
			return; /* EAGAIN, or a transient error: poll again */
		}
		struct ucred cr = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
		socklen_t len = sizeof cr;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != geteuid()) {
			s->stats.refused_peers++;
			struct conn tmp = {.fd = -1, .pid = cr.pid};
			audit_refusal(s, &tmp, "-", "peer of another uid", NULL);
			close(fd);
			continue;
		}
		struct conn *c = calloc(1, sizeof *c);
		struct conn **n = c ? realloc(s->conns, (s->n_conns + 1) * sizeof *n) : NULL;
		if (!n) {
			free(c);
			close(fd);
			return;
		}
		s->conns = n;
		c->fd = fd;
		c->pid = cr.pid;
		c->last_ms = c->refill_ms = now_ms();
		c->tokens = s->rate;
		s->conns[s->n_conns++] = c;
		s->stats.connections++;
	}
}

size_t ipc_server_pollfds(struct ipc_server *s, struct pollfd *fds, size_t max)
{
	size_t k = 0;
	s->n_polled = 0;
	s->polled_listener = false;
	struct conn **np = realloc(s->polled, (s->n_conns + 1) * sizeof *np);
	if (!np)
		return 0;
	s->polled = np;
	if (k < max && s->listen_fd >= 0 && s->n_conns < s->max_clients &&
	    now_ms() >= s->accept_paused_until) {
		fds[k++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
		s->polled_listener = true;
	}
	for (size_t i = 0; i < s->n_conns && k < max; i++) {
		struct conn *c = s->conns[i];
		short ev = 0;
		if (!c->closing && !c->eof && !c->throttled && c->out_bytes < IPC_OUT_MAX &&
		    c->n_out < PENDING_MAX)
			ev |= POLLIN;
		if (c->n_out)
			ev |= POLLOUT;
		fds[k++] = (struct pollfd){.fd = c->fd, .events = ev};
		s->polled[s->n_polled++] = c;
	}
	return k;
}

int ipc_server_timeout_ms(const struct ipc_server *s)
{
	uint64_t t = now_ms();
	int64_t best = -1;
	if (s->accept_paused_until > t)
		best = (int64_t)(s->accept_paused_until - t);
	for (size_t i = 0; i < s->n_conns; i++) {
		const struct conn *c = s->conns[i];
		int64_t due;
		if (ready(c))
			due = 0;
		else if (c->throttled)
			due = 1000 / (int64_t)s->rate + 1;
		else
			due = (int64_t)(c->last_ms + s->idle_ms) - (int64_t)t;
		if (due < 0)
			due = 0;
		if (best < 0 || due < best)
			best = due;
	}
	return best > INT32_MAX ? INT32_MAX : (int)best;
}

void ipc_server_handle(struct ipc_server *s, const struct pollfd *fds, size_t n)
{
	size_t k = 0;
	if (s->polled_listener && n > 0) {
		if (fds[0].fd == s->listen_fd && (fds[0].revents & POLLIN))
			accept_some(s);
		k = 1;
	}
	for (size_t i = 0; i < s->n_polled && k < n; i++, k++) {
		struct conn *c = s->polled[i];
		if (fds[k].fd != c->fd || !fds[k].revents)
			continue;
		if (fds[k].revents & POLLIN)
			conn_read(s, c);
		if ((fds[k].revents & (POLLERR | POLLNVAL)) ||
		    ((fds[k].revents & POLLHUP) && !(fds[k].revents & POLLIN)))
			c->eof = true;
		if (c->n_out && flush_out(s, c) < 0) {
			c->closing = true; /* the peer is gone: drop its answers */
			drop_out(c);
		}
		if (ready(c)) {
			serve_buffer(s, c); /* lines that waited for their answers to go out */
			if (c->n_out && flush_out(s, c) < 0) {
				c->closing = true;
				drop_out(c);
			}
		}
	}
	s->n_polled = 0;
	s->polled_listener = false;

	/* Timers and cleanup: throttled connections resume, idle ones go, closed ones are freed. */
	uint64_t t = now_ms();
	for (size_t i = 0; i < s->n_conns;) {
		struct conn *c = s->conns[i];
		if (!c->closing && (c->throttled || ready(c))) {
			serve_buffer(s, c);
			if (c->n_out && flush_out(s, c) < 0) {
				c->closing = true;
				drop_out(c);
			}
		}
		bool idle = t >= c->last_ms + s->idle_ms;
		if (idle && !c->closing && !(c->eof && !c->n_out))
			s->stats.timeouts++;
		bool finished =
		    c->closing || (c->eof && !has_line(c) && !c->throttled && !c->n_out);
		if (idle || finished) {
			conn_free(c);
			s->conns[i] = s->conns[--s->n_conns];
			continue;
		}
		i++;
	}
}
