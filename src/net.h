/* SPDX-License-Identifier: MIT */
/*
 * Network and local-socket policy (DESIGN section 12): which Unix sockets a sandboxed process may
 * connect to by path, which IP addresses it may reach directly, and which host names brokered's
 * proxy lets through. Pure decisions on already-resolved inputs (real paths, addresses, names);
 * the broker (broker-net.c) and the proxy (net-proxy.c) act on them. Refusals the user may approve
 * are kept as prompt blocks ("unix:PATH", "net:HOST"), guarded by a mutex: the proxy decides on
 * its own threads.
 */
#pragma once

#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "settings.h"

struct policy;
struct broker_prompt;

enum net_verdict {
	NET_ALLOW,
	NET_DENY,
	NET_PROMPT, /* refused until the user approves: recorded as a prompt block */
};

struct net {
	enum settings_net_mode mode;
	bool allow_localhost;
	const char *workspace, *scratch;	   /* real paths, borrowed */
	const struct policy *policy;		   /* for pattern expansion; borrowed */
	char **allowed, **denied, **unix_patterns; /* borrowed from the settings */
	size_t n_allowed, n_denied, n_unix_patterns;
	struct sockaddr_in proxy; /* proxy mode: where the proxy listens (port 0: not yet) */
	char **grants;		  /* approved "unix:PATH" / "net:HOST" */
	size_t n_grants;
	pthread_mutex_t lock; /* prompts and grants */
	struct broker_prompt *prompts;
	size_t n_prompts;
};

int net_new(const struct settings *s, const struct policy *p, const char *workspace,
	    const char *scratch, struct net **ret);
void net_free(struct net *n);

/* "unix:PATH" (absolute) or "net:HOST": an approval (--approve, the dialog, the session file). */
bool net_is_grant(const char *what);
int net_add_grant(struct net *n, const char *what);

/* Connecting to a path-named socket at real (the socket file's real path). */
enum net_verdict net_decide_unix(struct net *n, const char *real, const char **ret_rule);
/* Creating a socket file at real (bind): a write, decided by the file policy. */
bool net_may_bind_unix(struct net *n, const char *real, const char **ret_rule);
/* A direct connection or datagram to addr (AF_INET / AF_INET6) from inside. */
enum net_verdict net_decide_inet(struct net *n, const struct sockaddr *addr, socklen_t len,
				 const char **ret_rule);
/* Binding addr (AF_INET / AF_INET6) inside. */
enum net_verdict net_decide_inet_bind(struct net *n, const struct sockaddr *addr, socklen_t len,
				      const char **ret_rule);
/* A host name (or IP literal) asked of the proxy. */
enum net_verdict net_decide_host(struct net *n, const char *host, const char **ret_rule);
/* May the proxy connect to this resolved address for host? (loopback only if allowed) */
bool net_proxy_may_reach(const struct net *n, const char *host, const struct sockaddr *addr);

/* Does pattern ("example.com", "*.example.com") match host? Case-insensitive, trailing dot ignored.
 */
bool net_domain_matches(const char *pattern, const char *host);
/* 127/8, ::1, ::ffff:127.x (and 0.0.0.0, ::, which reach the local host too). */
bool net_addr_is_local(const struct sockaddr *addr, socklen_t len);

/* Record a refusal ("unix:PATH" / "net:HOST"); merged per name. */
void net_record_prompt(struct net *n, const char *what, const char *op, const char *rule);
/* Take the recorded prompt blocks (caller frees with net_prompts_free). */
struct broker_prompt *net_take_prompts(struct net *n, size_t *ret_n);
void net_prompts_free(struct broker_prompt *v, size_t n);
