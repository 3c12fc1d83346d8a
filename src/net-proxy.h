/* SPDX-License-Identifier: MIT */
/*
 * The proxy of network mode "proxy" (DESIGN section 12): it runs in brokered, outside the sandbox,
 * on 127.0.0.1, and is the only address the sandbox may connect to. It speaks HTTP (CONNECT and
 * plain forwarding of absolute-form requests) and SOCKS5 (no authentication, CONNECT, host names
 * and addresses) on one port, and lets a connection through only to a host name that
 * net_decide_host() allows; an address that a name resolves to on the local host is reached only
 * when allowed (net_proxy_may_reach). Hostile clients: the request head is bounded
 * (NET_PROXY_HEAD_MAX), a client that does not finish it in NET_PROXY_HEAD_TIMEOUT_S is dropped,
 * and at most NET_PROXY_MAX_CONNS connections are served at once.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct net;
struct net_proxy;

#define NET_PROXY_HEAD_MAX	 16384
#define NET_PROXY_HEADERS_MAX	 100
#define NET_PROXY_HEAD_TIMEOUT_S 15
#define NET_PROXY_IDLE_TIMEOUT_S 300
#define NET_PROXY_MAX_CONNS	 64

enum net_proxy_kind {
	NET_PROXY_CONNECT, /* a tunnel: HTTP CONNECT or SOCKS5 CONNECT */
	NET_PROXY_FORWARD, /* plain HTTP: the head is rewritten and sent on */
};

struct net_proxy_request {
	enum net_proxy_kind kind;
	char host[256]; /* a name or an address literal, without brackets */
	uint16_t port;
	size_t head_len; /* bytes of the client's head (through the empty line, or the SOCKS
			    request) */
	char *forward;	 /* NET_PROXY_FORWARD: the head to send upstream (malloc'd) */
	size_t forward_len;
};
void net_proxy_request_done(struct net_proxy_request *r);

/*
 * Parse an HTTP proxy request head at the start of buf. 0: complete; -EAGAIN: incomplete, read
 * more; -E2BIG: the head is longer than NET_PROXY_HEAD_MAX or has too many headers; -EINVAL:
 * malformed or a target that is not http:// (forwarding) or host:port (CONNECT); -ENOMEM.
 */
int net_proxy_parse_http(const char *buf, size_t n, struct net_proxy_request *ret);
/*
 * SOCKS5. The greeting (version, methods): its length, -EAGAIN, -EINVAL, or -EPERM when it does
 * not offer "no authentication". The request: its length (and *ret filled), -EAGAIN, -EINVAL, or
 * -EOPNOTSUPP for a command other than CONNECT.
 */
int net_proxy_parse_socks_greeting(const uint8_t *buf, size_t n);
int net_proxy_parse_socks_request(const uint8_t *buf, size_t n, struct net_proxy_request *ret);

/* Start the proxy on 127.0.0.1 (a free port); n->proxy is set to its address. */
int net_proxy_start(struct net *n, struct net_proxy **ret);
/* Stop accepting, close every connection, wait for its threads. NULL is fine. */
void net_proxy_stop(struct net_proxy *p);
