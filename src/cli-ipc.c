/* SPDX-License-Identifier: MIT */
/*
 * serve, client, trash: the socket door for people and scripts (DESIGN sections 5 and 10).
 *
 *   brokered serve [--session ID] [--workspace DIR] [--socket PATH] [--settings FILE]
 *                  [--delete-mode trash|unlink] [--max-clients N] [--rate N] [--idle-timeout SEC]
 *   brokered client [--socket PATH] [--session ID] [--tool-call ID] [--trace ID] [--timeout SEC]
 *                   COMMAND ARGS...
 *   brokered trash list [--json] | restore [--to PATH] PATH|NAME... | empty
 *
 * `client` exits 0 when the broker did it, 1 when it refused or failed (fail closed; usage errors
 * too, so that a caller never falls back on a request it got wrong), 2 when no broker answered
 * (no socket, refused connection, timeout, garbage): only then may a caller fall back.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "basic/fd-util.h"
#include "basic/json-write.h"
#include "basic/json.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/path-util.h"
#include "basic/socket-util.h"
#include "basic/strbuf.h"
#include "broker.h"
#include "cli.h"
#include "ipc-proto.h"
#include "ipc.h"
#include "log.h"
#include "session.h"
#include "settings.h"
#include "store.h"
#include "trash.h"

#define CLIENT_EXIT_OK	    0
#define CLIENT_EXIT_DENIED  1
#define CLIENT_EXIT_NOROUTE 2
#define CLIENT_ANSWER_MAX   (1 << 20)

/* ---- serve ---- */

struct serve {
	struct session *s;
	const char *message;
};

static int serve_enable(void *userdata, const struct ipc_json_req *req, char **ret_turn)
{
	struct serve *sv = userdata;
	struct session *s = sv->s;
	struct store_options so = {
	    .enabled = s->settings->backup_enabled,
	    .max_size_bytes = s->settings->backup_max_size_mb * 1024 * 1024,
	    .deny_oversize = s->settings->backup_deny_oversize,
	    .sync = s->settings->backup_sync,
	};
	if (req->has_max_size_mb)
		so.max_size_bytes = store_clamp_max_size_mb(req->max_size_mb, true) * 1024 * 1024;
	const char *msg = req->message ? req->message : "EnableModifyBackup";
	_cleanup_free_ char *id = NULL;
	int r = store_turn_begin_explicit(s->store, &so, msg, &id);
	if (r < 0 && r != -EBUSY)
		return r;
	/* Our private turn so far ends here; from now on the explicit turn collects. */
	if ((r = session_finish_turn(s, sv->message)) < 0)
		return r;
	if ((r = session_ensure_turn(s, sv->message)) < 0)
		return r;
	*ret_turn = strdup(store_turn_id(s->turn));
	return *ret_turn ? 0 : -ENOMEM;
}

static int serve_commit(void *userdata, const struct ipc_json_req *req, char **ret_turn)
{
	struct serve *sv = userdata;
	struct session *s = sv->s;
	const char *msg = req->message ? req->message : "CommitModifyBackup";
	if (!s->turn)
		return -ENOENT;
	_cleanup_free_ char *id = strdup(store_turn_id(s->turn));
	if (!id)
		return -ENOMEM;
	bool owned = s->turn_owned;
	int r = session_finish_turn(s, msg);
	if (r >= 0 && !owned)
		r = store_commit_id(s->store, id, msg);
	/* The next backup cycle starts now, so that no change goes unrecorded. */
	int k = session_ensure_turn(s, sv->message);
	if (r < 0)
		return r;
	if (k < 0)
		return k;
	*ret_turn = TAKE_PTR(id);
	return 0;
}

enum {
	OPT_SESSION = 0x100,
	OPT_WORKSPACE,
	OPT_SOCKET,
	OPT_SETTINGS,
	OPT_DELETE_MODE,
	OPT_MAX_CLIENTS,
	OPT_RATE,
	OPT_IDLE,
	OPT_TOOL_CALL,
	OPT_TRACE,
	OPT_TIMEOUT,
	OPT_JSON,
	OPT_TO,
};

static int parse_uint(const char *s, unsigned max, unsigned *ret)
{
	uint64_t v;
	if (parse_u64(s, 10, &v) < 0 || v == 0 || v > max)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

struct serve_args {
	struct session_options so;
	struct ipc_config ic;
	const char *message;
	enum broker_delete_mode delete_mode;
};

/* 1: go on; 0: --help was shown; -EINVAL: a bad option or argument (logged). */
static int serve_parse_args(int argc, char **argv, struct serve_args *a)
{
	static const struct option opts[] = {
	    {"session", required_argument, NULL, OPT_SESSION},
	    {"workspace", required_argument, NULL, OPT_WORKSPACE},
	    {"socket", required_argument, NULL, OPT_SOCKET},
	    {"settings", required_argument, NULL, OPT_SETTINGS},
	    {"delete-mode", required_argument, NULL, OPT_DELETE_MODE},
	    {"max-clients", required_argument, NULL, OPT_MAX_CLIENTS},
	    {"rate", required_argument, NULL, OPT_RATE},
	    {"idle-timeout", required_argument, NULL, OPT_IDLE},
	    {"message", required_argument, NULL, 'm'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	unsigned idle = 0;
	optind = 0;
	opterr = 0;
	for (int c; (c = getopt_long(argc, argv, "+m:h", opts, NULL)) >= 0;) {
		switch (c) {
		case OPT_SESSION:
			a->so.session = optarg;
			break;
		case OPT_WORKSPACE:
			a->so.workspace = optarg;
			break;
		case OPT_SOCKET:
			a->ic.socket_path = optarg;
			break;
		case OPT_SETTINGS:
			a->so.settings = optarg;
			break;
		case OPT_DELETE_MODE:
			if (!strcmp(optarg, "trash"))
				a->delete_mode = BROKER_DELETE_TRASH;
			else if (!strcmp(optarg, "unlink"))
				a->delete_mode = BROKER_DELETE_UNLINK;
			else
				return log_error("--delete-mode must be trash or unlink"), -EINVAL;
			break;
		case OPT_MAX_CLIENTS:
			if (parse_uint(optarg, 65536, &a->ic.max_clients) < 0)
				return log_error("Invalid --max-clients \"%s\"", optarg), -EINVAL;
			break;
		case OPT_RATE:
			if (parse_uint(optarg, 1000000, &a->ic.rate) < 0)
				return log_error("Invalid --rate \"%s\"", optarg), -EINVAL;
			break;
		case OPT_IDLE:
			if (parse_uint(optarg, 86400, &idle) < 0)
				return log_error("Invalid --idle-timeout \"%s\"", optarg), -EINVAL;
			a->ic.idle_timeout_ms = idle * 1000;
			break;
		case 'm':
			a->message = optarg;
			break;
		case 'h':
			puts("Usage: brokered serve [--session ID] [--workspace DIR] [--socket "
			     "PATH] "
			     "[--settings FILE] [--delete-mode trash|unlink] [--max-clients N] "
			     "[--rate N] "
			     "[--idle-timeout SEC] [-m MSG]");
			return 0;
		default:
			log_error("serve: unknown option or missing argument: %s",
				  argv[optind - 1]);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		log_error("serve: unexpected argument \"%s\"", argv[optind]);
		return -EINVAL;
	}
	return 1;
}

/* Listen on the session's socket; -errno once logged. */
static int serve_listen(struct ipc_config *ic, struct session *s, struct serve *sv,
			struct ipc_server **ret)
{
	ic->session_id = s->id;
	ic->audit = s->audit;
	ic->ops = (struct ipc_session_ops){serve_enable, serve_commit, sv};
	int r = ipc_server_new(ic, s->broker, ret);
	if (r == -EADDRINUSE)
		log_error("A broker already serves session %s", s->id);
	else if (r == -EPERM)
		log_error("Failed to listen on the broker socket: its directory must be yours "
			  "and closed to others (mode 0700)");
	else if (r < 0)
		log_error_errno(r, "Failed to listen on the broker socket: %m");
	return r;
}

/* Serve clients until SIGINT, SIGTERM or SIGHUP arrives on sfd. */
static int serve_loop(struct ipc_server *srv, struct session *s, int sfd)
{
	size_t max = 1 + 65536 + 2;
	_cleanup_free_ struct pollfd *fds = calloc(max, sizeof *fds);
	if (!fds)
		return -ENOMEM;
	for (bool stop = false; !stop;) {
		fds[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
		size_t n = ipc_server_pollfds(srv, fds + 1, max - 1);
		int t = ipc_server_timeout_ms(srv);
		if (t < 0 || t > 1000)
			t = 1000;
		int k = poll(fds, n + 1, t);
		if (k < 0 && errno != EINTR)
			return log_error_errno(errno, "Failed to wait for clients: %m"), 0;
		if (k < 0)
			k = 0;
		if (k > 0 && (fds[0].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
				stop = true;
		}
		ipc_server_handle(srv, fds + 1, k > 0 ? n : 0);
		(void)audit_flush(s->audit);
	}
	return 0;
}

int cli_serve(int argc, char **argv)
{
	struct serve_args a = {
	    .so = {.tool_call = "serve"},
	    .message = "brokered serve",
	    .delete_mode = BROKER_DELETE_UNLINK,
	};
	int r = serve_parse_args(argc, argv, &a);
	if (r <= 0)
		return r < 0 ? 2 : 0;

	int ret = 1;
	struct session *s = NULL;
	struct ipc_server *srv = NULL;
	int sfd = -1;
	sigset_t mask, old;
	/* The policy's scratch default needs a directory; serve's is private and empty. */
	const char *tmp = getenv("TMPDIR");
	char scratch[4200];
	snprintf(scratch, sizeof scratch, "%s/brokered-serve-XXXXXX",
		 tmp && tmp[0] == '/' && strlen(tmp) < 4000 ? tmp : "/tmp");
	if (!mkdtemp(scratch)) {
		log_error_errno(errno, "Failed to create a scratch directory: %m");
		return 1;
	}
	_cleanup_free_ char *scratch_real = realpath(scratch, NULL);
	a.so.scratch = scratch_real;
	_cleanup_free_ char *err = NULL;
	if (!scratch_real || session_open(&a.so, &s, &err) < 0) {
		log_error("%s", err ? err : "Failed to open the session");
		goto out;
	}
	broker_set_delete_mode(s->broker, a.delete_mode);
	if ((r = session_ensure_turn(s, a.message)) < 0) {
		log_error_errno(r, "Failed to open a backup turn: %m");
		goto out;
	}
	struct serve sv = {.s = s, .message = a.message};
	if (serve_listen(&a.ic, s, &sv, &srv) < 0)
		goto out;
	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, &old);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		log_error_errno(errno, "Failed to create a signalfd: %m");
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);
	log_info("Serving session %s on %s", s->id, ipc_server_path(srv));
	printf("%s\n", ipc_server_path(srv));
	fflush(stdout);
	if (serve_loop(srv, s, sfd) >= 0)
		ret = 0;
out:
	ipc_server_free(srv);
	session_close(s);
	safe_close(sfd);
	(void)rmdir(scratch);
	return ret;
}

/* ---- client ---- */

struct client {
	const char *socket, *session, *tool_call, *trace;
	unsigned timeout_ms;
	int fd;
};

static int64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_fd(int fd, short ev, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - mono_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd p = {.fd = fd, .events = ev};
		int k = poll(&p, 1, (int)MIN(left, 1000000));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		if (k > 0)
			return 0;
	}
}

static int client_connect(struct client *c, int64_t deadline)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(c->socket) >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, c->socket, strlen(c->socket) + 1);
	for (;;) {
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (c->fd < 0)
			return negative_errno();
		if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0)
			return 0;
		int e = errno;
		c->fd = safe_close(c->fd);
		if (e != EAGAIN) /* ENOENT, ECONNREFUSED, EACCES: nobody there */
			return -e;
		/* The listen backlog is full: the broker is busy, not gone. */
		if (mono_ms() >= deadline)
			return -ETIMEDOUT;
		usleep(2000);
	}
}

/* Send one line, read one line back (and an fd with it). Any failure: the broker is unavailable. */
static int client_exchange(struct client *c, const char *line, size_t n, char **ret_answer,
			   int *ret_fd)
{
	int64_t deadline = mono_ms() + c->timeout_ms;
	int r = client_connect(c, deadline);
	if (r < 0)
		return r;
	for (size_t off = 0; off < n;) {
		ssize_t k = send(c->fd, line + off, n - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EAGAIN) {
			if ((r = wait_fd(c->fd, POLLOUT, deadline)) < 0)
				return r;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return negative_errno();
		off += (size_t)k;
	}
	struct strbuf in = STRBUF_INIT;
	*ret_fd = -1;
	for (;;) {
		char buf[4096];
		struct iovec iov = {buf, sizeof buf};
		union {
			char b[CMSG_SPACE(sizeof(int) * 4)];
			struct cmsghdr align;
		} u;
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = u.b,
				    .msg_controllen = sizeof u.b};
		ssize_t k = recvmsg(c->fd, &mh, MSG_CMSG_CLOEXEC);
		if (k < 0 && errno == EAGAIN) {
			if ((r = wait_fd(c->fd, POLLIN, deadline)) < 0)
				break;
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			r = k < 0 ? negative_errno() : -ECONNRESET;
			break;
		}
		int fd = cmsg_take_first_fd(&mh);
		if (*ret_fd < 0)
			*ret_fd = fd;
		else
			safe_close(fd);
		strbuf_append(&in, buf, (size_t)k);
		char *nl = in.buf ? memchr(in.buf, '\n', in.len) : NULL;
		if (nl) {
			*nl = '\0';
			r = 0;
			break;
		}
		if (in.len > CLIENT_ANSWER_MAX || in.oom) {
			r = -EPROTO;
			break;
		}
	}
	if (r < 0) {
		*ret_fd = safe_close(*ret_fd);
		strbuf_free(&in);
		return r;
	}
	*ret_answer = strbuf_steal(&in);
	return *ret_answer ? 0 : -ENOMEM;
}

/* A path from the command line, absolute against our cwd (lexically: the last component keeps
 * its meaning, e.g. a symlink to delete stays the symlink). */
static char *abs_path(const char *p)
{
	struct strbuf sb = STRBUF_INIT;
	if (p[0] == '/') {
		strbuf_appends(&sb, p);
	} else {
		_cleanup_free_ char *cwd = getcwd(NULL, 0);
		if (!cwd)
			return NULL;
		path_join(cwd, p, &sb);
	}
	return strbuf_steal(&sb);
}

static void client_unavailable(const struct client *c, int r)
{
	log_error("Broker unavailable at \"%s\": %s", c->socket,
		  r == -ETIMEDOUT ? "timed out" : strerror(-r));
}

static int client_json(struct client *c, struct strbuf *req)
{
	if (req->oom)
		return log_error("Out of memory"), CLIENT_EXIT_DENIED;
	_cleanup_free_ char *answer = NULL;
	int fd = -1;
	strbuf_appendc(req, '\n');
	int r = client_exchange(c, req->buf, req->len, &answer, &fd);
	safe_close(fd);
	if (r < 0) {
		client_unavailable(c, r);
		return CLIENT_EXIT_NOROUTE;
	}
	_cleanup_json_ struct json_value *v = NULL;
	bool okv = false;
	if (json_parse(answer, strlen(answer), NULL, &v, NULL) < 0 || json_type(v) != JSON_OBJECT ||
	    json_get_bool(json_object_get(v, "ok"), &okv) < 0) {
		log_error("Broker at \"%s\" answered garbage", c->socket);
		return CLIENT_EXIT_NOROUTE;
	}
	puts(answer);
	if (!okv) {
		const char *e = json_get_string(json_object_get(v, "error"), NULL);
		log_error("Refused: %s", e ? e : "failed");
	}
	return okv ? CLIENT_EXIT_OK : CLIENT_EXIT_DENIED;
}

static void json_head(struct client *c, struct strbuf *sb, const char *command, const char *op)
{
	char id[64];
	snprintf(id, sizeof id, "cli-%d-%" PRId64, (int)getpid(), mono_ms());
	strbuf_appendc(sb, '{');
	json_kv_str(sb, "id", id);
	json_kv_str(sb, "command", command);
	if (op)
		json_kv_str(sb, "operation", op);
	json_kv_str(sb, "sessionId", c->session);
	if (c->tool_call)
		json_kv_str(sb, "toolCallId", c->tool_call);
	if (c->trace)
		json_kv_str(sb, "brokerTraceId", c->trace);
}

/* ,"key":"path" with the path's bytes kept: json_append_string() writes a byte that is not UTF-8
 * as \u00XX (a different name once decoded); the broker accepts raw bytes in strings. */
static int json_kv_bytes(struct strbuf *sb, const char *key, const char *v)
{
	json_key(sb, key);
	strbuf_appendc(sb, '"');
	for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
		if (*p == '"' || *p == '\\')
			strbuf_printf(sb, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			strbuf_printf(sb, "\\u%04x", *p);
		else
			strbuf_appendc(sb, (char)*p);
	}
	strbuf_appendc(sb, '"');
	return sb->oom ? -ENOMEM : 0;
}

static int json_path(struct strbuf *sb, const char *key, const char *p)
{
	_cleanup_free_ char *a = abs_path(p);
	if (!a)
		return -ENOMEM;
	return json_kv_bytes(sb, key, a);
}

static int client_token(struct client *c, bool rw, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"flags", required_argument, NULL, 'F'},
	    {"mode", required_argument, NULL, 'M'},
	    {"data", required_argument, NULL, 'd'},
	    {"cat", no_argument, NULL, 'c'},
	    {NULL, 0, NULL, 0},
	};
	const char *flags = "-", *mode = "-", *data = NULL;
	bool cat = false;
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "+", opts, NULL)) >= 0;) {
		switch (o) {
		case 'F':
			flags = optarg;
			break;
		case 'M':
			mode = optarg;
			break;
		case 'd':
			data = optarg;
			break;
		case 'c':
			cat = true;
			break;
		default:
			log_error("%s: unknown option or missing argument", argv[0]);
			return CLIENT_EXIT_DENIED;
		}
	}
	if (optind + 1 != argc) {
		log_error("Usage: brokered client %s [OPTIONS] PATH", argv[0]);
		return CLIENT_EXIT_DENIED;
	}
	_cleanup_free_ char *path = abs_path(argv[optind]);
	if (!path || strpbrk(path, "\t\n")) {
		log_error("The text protocol cannot carry this path (TAB or LF): use `json`");
		return CLIENT_EXIT_DENIED;
	}
	struct strbuf sb = STRBUF_INIT;
	strbuf_printf(&sb, "%s\t%s\t%s\t%s\t%s\t%s\n", rw ? IPC_CLASS_WRITE : IPC_CLASS_READ, path,
		      c->session, c->tool_call ? c->tool_call : "", flags, mode);
	_cleanup_free_ char *answer = NULL;
	_cleanup_close_ int fd = -1;
	int r = sb.oom ? -ENOMEM : client_exchange(c, sb.buf, sb.len, &answer, &fd);
	strbuf_free(&sb);
	if (r < 0) {
		client_unavailable(c, r);
		return CLIENT_EXIT_NOROUTE;
	}
	if (!strcmp(answer, "FD")) {
		if (fd < 0) {
			log_error("Broker said FD but sent none");
			return CLIENT_EXIT_NOROUTE;
		}
		char target[BROKERED_PATH_MAX + 1];
		ssize_t k = readlink(FORMAT_PROC_FD_PATH(fd), target, sizeof target - 1);
		target[k > 0 ? k : 0] = '\0';
		int fl = fcntl(fd, F_GETFL);
		const char *acc = (fl & O_ACCMODE) == O_RDONLY	 ? "r"
				  : (fl & O_ACCMODE) == O_WRONLY ? "w"
								 : "rw";
		printf("FD %s %s\n", acc, target);
		fflush(stdout);
		if (data) {
			size_t len = strlen(data);
			if (write(fd, data, len) != (ssize_t)len) {
				log_error_errno(errno, "Failed to write through the fd: %m");
				return CLIENT_EXIT_DENIED;
			}
		}
		if (cat) {
			char buf[65536];
			ssize_t n;
			while ((n = read(fd, buf, sizeof buf)) > 0)
				fwrite(buf, 1, (size_t)n, stdout);
		}
		return CLIENT_EXIT_OK;
	}
	if (!strcmp(answer, "SANDBOX")) {
		puts("SANDBOX");
		return CLIENT_EXIT_OK;
	}
	if (!strcmp(answer, "DENY")) {
		puts("DENY");
		return CLIENT_EXIT_DENIED;
	}
	log_error("Broker at \"%s\" answered garbage", c->socket);
	return CLIENT_EXIT_NOROUTE;
}

static int client_usage(void)
{
	fputs(
	    "Usage: brokered client [--socket PATH] [--session ID] [--tool-call ID] [--trace ID]\n"
	    "                       [--timeout SEC] COMMAND ARGS...\n"
	    "  read [--cat] PATH                  text token request, read\n"
	    "  write [--flags F] [--mode M] [--data STR] PATH   text token request, read-write\n"
	    "  delete [--trash|--unlink] [-r] [-f] [--report PATH] PATH\n"
	    "  mkdir [-p] [-m MODE] PATH          rename FROM TO         copy [-r] FROM TO\n"
	    "  chmod MODE PATH                    link [-s] FROM TO      touch PATH\n"
	    "  modify-backup PATH                 enable-backup [-m MSG] commit-backup -m MSG\n"
	    "  json 'JSON'                        one raw request line\n"
	    "Exit status: 0 done, 1 denied or failed, 2 broker unavailable.\n",
	    stderr);
	return CLIENT_EXIT_DENIED;
}

/* The client's own options. 1: go on; 0: --help was shown; -EINVAL: a bad option (logged). */
static int client_parse_args(int argc, char **argv, struct client *c)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, OPT_SOCKET},
	    {"session", required_argument, NULL, OPT_SESSION},
	    {"tool-call", required_argument, NULL, OPT_TOOL_CALL},
	    {"trace", required_argument, NULL, OPT_TRACE},
	    {"timeout", required_argument, NULL, OPT_TIMEOUT},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(argc, argv, "+h", opts, NULL)) >= 0;) {
		unsigned sec;
		switch (o) {
		case OPT_SOCKET:
			c->socket = optarg;
			break;
		case OPT_SESSION:
			c->session = optarg;
			break;
		case OPT_TOOL_CALL:
			c->tool_call = optarg;
			break;
		case OPT_TRACE:
			c->trace = optarg;
			break;
		case OPT_TIMEOUT:
			if (parse_uint(optarg, 3600, &sec) < 0) {
				log_error("Invalid --timeout \"%s\"", optarg);
				return -EINVAL;
			}
			c->timeout_ms = sec * 1000;
			break;
		case 'h':
			client_usage();
			return 0;
		default:
			log_error("client: unknown option or missing argument: %s",
				  argv[optind - 1]);
			return -EINVAL;
		}
	}
	return 1;
}

/* The session and the socket, from the options, the environment or the defaults: 0, or the exit
 * status. ret_sid and ret_sock keep what was made up. */
static int client_endpoint(struct client *c, char **ret_sid, char **ret_sock)
{
	if (!c->session)
		c->session = getenv("BROKERED_SESSION_ID");
	if (!c->session || !*c->session) {
		if (cli_default_session_id(NULL, ret_sid) < 0) {
			log_error("No session: pass --session or set BROKERED_SESSION_ID");
			return CLIENT_EXIT_DENIED;
		}
		c->session = *ret_sid;
	}
	if (!c->tool_call)
		c->tool_call = getenv("BROKERED_TOOL_CALL_ID");
	if (!c->socket)
		c->socket = getenv("BROKERED_IPC_ADDRESS");
	if (!c->socket || !*c->socket) {
		if (ipc_default_socket_path(c->session, ret_sock) < 0) {
			log_error("No broker socket: pass --socket or set BROKERED_IPC_ADDRESS");
			return CLIENT_EXIT_NOROUTE;
		}
		c->socket = *ret_sock;
	}
	return 0;
}

/* The options of one operation (delete, mkdir, ...). */
struct client_op_options {
	const char *delete_mode, *mode, *message, *report, *max_size;
	bool recursive, force, symbolic;
};

static int client_parse_op_options(const char *cmd, int ac, char **av,
				   struct client_op_options *ret)
{
	static const struct option oo[] = {
	    {"trash", no_argument, NULL, 'T'},
	    {"unlink", no_argument, NULL, 'U'},
	    {"recursive", no_argument, NULL, 'r'},
	    {"force", no_argument, NULL, 'f'},
	    {"parents", no_argument, NULL, 'p'},
	    {"symbolic", no_argument, NULL, 's'},
	    {"mode", required_argument, NULL, 'm'},
	    {"message", required_argument, NULL, 'M'},
	    {"report", required_argument, NULL, 'R'},
	    {"max-size-mb", required_argument, NULL, 'S'},
	    {NULL, 0, NULL, 0},
	};
	optind = 0;
	opterr = 0;
	for (int o; (o = getopt_long(ac, av, "+rRfpsm:", oo, NULL)) >= 0;) {
		switch (o) {
		case 'T':
			ret->delete_mode = "trash";
			break;
		case 'U':
			ret->delete_mode = "unlink";
			break;
		case 'r':
		case 'p':
			ret->recursive = true;
			break;
		case 'f':
			ret->force = true;
			break;
		case 's':
			ret->symbolic = true;
			break;
		case 'm':
			if (!strcmp(cmd, "mkdir"))
				ret->mode = optarg;
			else
				ret->message = optarg;
			break;
		case 'M':
			ret->message = optarg;
			break;
		case 'R':
			ret->report = optarg;
			break;
		case 'S':
			ret->max_size = optarg;
			break;
		default:
			log_error("%s: unknown option or missing argument", cmd);
			return -EINVAL;
		}
	}
	return 0;
}

struct client_op {
	const char *name, *command, *op;
	int nargs;
};

/* The request line of an operation, its operands and options; -EINVAL on a bad --max-size-mb. */
static int client_op_json(struct client *c, struct strbuf *sb, const struct client_op *t,
			  char **arg, const struct client_op_options *oo)
{
	json_head(c, sb, t->command, t->op);
	if (!strcmp(t->name, "chmod")) {
		json_kv_str(sb, "mode", arg[0]);
		json_path(sb, "path", arg[1]);
	} else if (t->nargs == 2) {
		/* A symbolic link's content is kept as written. */
		if (oo->symbolic && !strcmp(t->name, "link"))
			json_kv_bytes(sb, "from", arg[0]);
		else
			json_path(sb, "from", arg[0]);
		json_path(sb, "to", arg[1]);
	} else if (t->nargs == 1) {
		json_path(sb, "path", arg[0]);
	}
	if (oo->delete_mode)
		json_kv_str(sb, "deleteMode", oo->delete_mode);
	if (oo->recursive)
		json_kv_bool(sb, "recursive", true);
	if (oo->force)
		json_kv_bool(sb, "force", true);
	if (oo->symbolic)
		json_kv_bool(sb, "symbolic", true);
	if (oo->mode)
		json_kv_str(sb, "mode", oo->mode);
	if (oo->report)
		json_path(sb, "safeDeleteReportPath", oo->report);
	if (oo->message)
		json_kv_str(sb, "message", oo->message);
	if (oo->max_size) {
		int64_t v;
		if (parse_i64(oo->max_size, 10, &v) < 0)
			return -EINVAL;
		json_kv_int(sb, "maxSizeMB", v);
	}
	strbuf_appendc(sb, '}');
	return 0;
}

/* One operation of the JSON protocol: options, then operands. */
static int client_operation(struct client *c, const char *cmd, int ac, char **av)
{
	static const struct client_op table[] = {
	    {"delete", "HostFileOperation", "delete", 1},
	    {"mkdir", "HostFileOperation", "mkdir", 1},
	    {"rename", "HostFileOperation", "rename", 2},
	    {"copy", "HostFileOperation", "copy", 2},
	    {"chmod", "HostFileOperation", "chmod", 2},
	    {"link", "HostFileOperation", "link", 2},
	    {"touch", "HostFileOperation", "touch", 1},
	    {"modify-backup", "ModifyBackup", NULL, 1},
	    {"enable-backup", "EnableModifyBackup", NULL, 0},
	    {"commit-backup", "CommitModifyBackup", NULL, 0},
	};
	struct client_op_options oo = {0};
	if (client_parse_op_options(cmd, ac, av, &oo) < 0)
		return CLIENT_EXIT_DENIED;
	size_t t = 0;
	while (t < ELEMENTSOF(table) && strcmp(table[t].name, cmd))
		t++;
	if (t == ELEMENTSOF(table)) {
		log_error("Unknown client command \"%s\"", cmd);
		return client_usage();
	}
	if (ac - optind != table[t].nargs)
		return client_usage();
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	if (client_op_json(c, &sb, &table[t], av + optind, &oo) < 0)
		return client_usage();
	return client_json(c, &sb);
}

int cli_client(int argc, char **argv)
{
	struct client c = {.timeout_ms = 10000, .fd = -1};
	int r = client_parse_args(argc, argv, &c);
	if (r <= 0)
		return r < 0 ? CLIENT_EXIT_DENIED : 0;
	if (optind >= argc)
		return client_usage();
	_cleanup_free_ char *sid = NULL, *sock = NULL;
	if ((r = client_endpoint(&c, &sid, &sock)) != 0)
		return r;
	signal(SIGPIPE, SIG_IGN);

	const char *cmd = argv[optind];
	int ac = argc - optind;
	char **av = argv + optind;
	if (!strcmp(cmd, "read") || !strcmp(cmd, "write"))
		return client_token(&c, cmd[0] == 'w', ac, av);
	if (!strcmp(cmd, "json")) {
		if (ac != 2 || strchr(av[1], '\n'))
			return client_usage();
		_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
		strbuf_appends(&sb, av[1]);
		return client_json(&c, &sb);
	}
	return client_operation(&c, cmd, ac, av);
}

/* ---- trash ---- */

static int trash_find(const char *arg, struct trash_entry *v, size_t n)
{
	_cleanup_free_ char *a = abs_path(arg);
	struct strbuf norm = STRBUF_INIT;
	if (a)
		(void)path_normalise(a, &norm);
	int best = -1;
	for (size_t i = 0; i < n; i++) {
		if (!v[i].in_files)
			continue;
		if ((norm.len && !strcmp(v[i].original_path, norm.buf)) || !strcmp(v[i].name, arg))
			best = (int)i; /* oldest first: the last match is the newest */
	}
	strbuf_free(&norm);
	return best;
}

int cli_trash(int argc, char **argv)
{
	if (argc < 2) {
		fputs("Usage: brokered trash list [--json] | restore [--to PATH] PATH|NAME... | "
		      "empty\n",
		      stderr);
		return 2;
	}
	const char *sub = argv[1];
	struct trash_entry *v = NULL;
	size_t n = 0;
	int r = trash_list(&v, &n);
	if (r < 0)
		return log_error_errno(r, "Failed to read the trash: %m"), 1;
	int ret = 0;
	if (!strcmp(sub, "list")) {
		bool json = argc > 2 && !strcmp(argv[2], "--json");
		for (size_t i = 0; i < n; i++) {
			if (json) {
				struct strbuf sb = STRBUF_INIT;
				strbuf_appendc(&sb, '{');
				json_kv_str(&sb, "path", v[i].original_path);
				json_kv_str(&sb, "deletionDate", v[i].deletion_date);
				json_kv_str(&sb, "name", v[i].name);
				json_kv_str(&sb, "trash", v[i].trash_dir);
				json_kv_bool(&sb, "present", v[i].in_files);
				strbuf_appends(&sb, "}");
				if (!sb.oom)
					puts(sb.buf);
				strbuf_free(&sb);
			} else {
				printf("%s %s%s\n", v[i].deletion_date, v[i].original_path,
				       v[i].in_files ? "" : " (missing)");
			}
		}
	} else if (!strcmp(sub, "restore")) {
		const char *to = NULL;
		int i = 2;
		if (argc > 3 && !strcmp(argv[2], "--to")) {
			to = argv[3];
			i = 4;
		}
		if (i >= argc) {
			log_error("trash restore: name a path or an entry");
			ret = 2;
		}
		for (; i < argc; i++) {
			int k = trash_find(argv[i], v, n);
			if (k < 0) {
				log_error("Not in the trash: %s", argv[i]);
				ret = 1;
				continue;
			}
			_cleanup_free_ char *dest = to ? abs_path(to) : NULL;
			r = trash_restore(&v[k], dest);
			if (r < 0) {
				log_error_errno(r, "Failed to restore \"%s\": %m",
						v[k].original_path);
				ret = 1;
				continue;
			}
			v[k].in_files = false;
			printf("%s\n", dest ? dest : v[k].original_path);
		}
	} else if (!strcmp(sub, "empty")) {
		for (size_t i = 0; i < n; i++) {
			r = trash_remove(&v[i]);
			if (r < 0) {
				log_error_errno(r, "Failed to remove \"%s\" from the trash: %m",
						v[i].name);
				ret = 1;
			}
		}
	} else {
		log_error("Unknown trash command \"%s\"", sub);
		ret = 2;
	}
	trash_entries_free(v, n);
	return ret;
}
