/* SPDX-License-Identifier: MIT */
/*
 * The ipc server (DESIGN sections 2 and 5): a Unix socket (directory 0700, socket 0600) that
 * speaks the text token and the JSON HostFileOperation protocols (ipc-proto.h) to cooperative
 * clients, and hands every request to the same broker the supervisor uses.
 *
 * It owns no loop: the caller polls. Each round,
 *
 *     n = ipc_server_pollfds(s, fds + k, max - k);        // listener + connections
 *     timeout = min(own timeout, ipc_server_timeout_ms(s));
 *     poll(fds, k + n, timeout);
 *     ipc_server_handle(s, fds + k, n);                   // also after a timeout (0 ready)
 *
 * Connections are non-blocking with per-connection buffers: a request is one line (bounded by
 * IPC_LINE_MAX), answers are queued and written as the peer reads them (an answer carrying an fd
 * sends it with SCM_RIGHTS on its first byte), so a client that stalls — never finishing a line,
 * or never reading — stalls only itself and is closed after the idle timeout. Peers must have our
 * uid (SO_PEERCRED). Requests naming another session, malformed or oversized lines, and requests
 * over the per-connection rate (which is throttled, not dropped) are answered with an error and
 * written to the audit log (phase=ipc-error); nothing is performed for them. Never logs to stderr.
 */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct audit;
struct broker;
struct ipc_json_req;
struct ipc_server;

#define IPC_MAX_CLIENTS_DEFAULT	 256
#define IPC_RATE_DEFAULT	 2000  /* requests per second per connection (burst: the same) */
#define IPC_IDLE_TIMEOUT_DEFAULT 30000 /* ms without progress before a connection is closed */
#define IPC_OUT_MAX		 (1 << 20) /* queued answer bytes; above it the peer is not read */

/* EnableModifyBackup / CommitModifyBackup belong to whoever owns the turns (`serve`). */
struct ipc_session_ops {
	/* Open (or join) the session's backup turn; *ret_turn: its id (malloc'd). */
	int (*enable_backup)(void *userdata, const struct ipc_json_req *req, char **ret_turn);
	/* Commit it with req->message; *ret_turn: the committed turn's id (malloc'd). */
	int (*commit_backup)(void *userdata, const struct ipc_json_req *req, char **ret_turn);
	void *userdata;
};

struct ipc_config {
	const char *socket_path;  /* NULL: ipc_default_socket_path(session_id) */
	const char *session_id;	  /* required: requests naming another session are refused */
	struct audit *audit;	  /* where refusals of malformed requests go; may be NULL */
	unsigned max_clients;	  /* 0: IPC_MAX_CLIENTS_DEFAULT */
	unsigned rate;		  /* 0: IPC_RATE_DEFAULT */
	unsigned idle_timeout_ms; /* 0: IPC_IDLE_TIMEOUT_DEFAULT */
	/* NULL members: EnableModifyBackup answers with the broker's current turn, and
	 * CommitModifyBackup is refused (`run` commits its own turn when its command ends). */
	struct ipc_session_ops ops;
};

/* $XDG_RUNTIME_DIR/brokered/<session> (else /tmp/brokered-<uid>/<session>); not created. */
int ipc_socket_dir(const char *session_id, char **ret);
/* <ipc_socket_dir>/broker.sock: where `brokered serve` listens and clients look first. */
int ipc_default_socket_path(const char *session_id, char **ret);
/* <ipc_socket_dir>/run-<pid>.sock: a `run`'s own socket (many runs may share a session). */
int ipc_run_socket_path(const char *session_id, char **ret);

/*
 * Create the socket's directory (0700, must be ours and not group/world accessible), bind and
 * listen (socket 0600). A live socket at the path is -EADDRINUSE; a stale one is replaced.
 */
int ipc_server_new(const struct ipc_config *cfg, struct broker *b, struct ipc_server **ret);
/* Close every connection, remove the socket (and the directory if we made it and it is empty). */
void ipc_server_free(struct ipc_server *s);
const char *ipc_server_path(const struct ipc_server *s);

/* Fill up to max pollfds (listener first, then connections); returns how many. */
size_t ipc_server_pollfds(struct ipc_server *s, struct pollfd *fds, size_t max);
/* Serve what poll() reported in the fds of the last ipc_server_pollfds(), and due timers. */
void ipc_server_handle(struct ipc_server *s, const struct pollfd *fds, size_t n);
/* Milliseconds until the next timer (idle timeouts, throttled connections); -1: none. */
int ipc_server_timeout_ms(const struct ipc_server *s);

/* The environment the sandboxed command (or any client) needs: BROKERED_IPC_ADDRESS,
 * BROKERED_SESSION_ID and, when tool_call is not NULL, BROKERED_TOOL_CALL_ID (setenv). */
int ipc_attach_env(const struct ipc_server *s, const char *tool_call);

struct ipc_stats {
	uint64_t connections, requests, errors, refused_peers, timeouts, throttled, fds_sent;
	unsigned clients; /* open now */
};
void ipc_server_stats(const struct ipc_server *s, struct ipc_stats *ret);
