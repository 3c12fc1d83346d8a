/* SPDX-License-Identifier: MIT */
#include "net-proxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/strbuf.h"
#include "net.h"

void net_proxy_request_done(struct net_proxy_request *r)
{
	free(r->forward);
	r->forward = NULL;
}

/* ---- parsing (pure) ---- */

static bool host_char(char c)
{
	return ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') ||
	       c == '-' || c == '.' || c == '_' || c == ':';
}

/* "host:port" or "[v6]:port" (len bytes at s) into r->host / r->port; default_port if none. */
static int parse_authority(const char *s, size_t len, uint16_t default_port,
			   struct net_proxy_request *r)
{
	const char *host = s, *colon = NULL;
	size_t hl;
	if (len && s[0] == '[') {
		const char *close = memchr(s, ']', len);
		if (!close)
			return -EINVAL;
		host = s + 1;
		hl = (size_t)(close - host);
		size_t rest = len - (size_t)(close + 1 - s);
		if (rest && close[1] != ':')
			return -EINVAL;
		colon = rest ? close + 1 : NULL;
	} else {
		colon = memrchr(s, ':', len);
		hl = colon ? (size_t)(colon - s) : len;
		if (colon && memchr(s, ':', hl))
			return -EINVAL; /* an IPv6 literal must be in brackets */
	}
	if (hl == 0 || hl >= sizeof r->host)
		return -EINVAL;
	for (size_t i = 0; i < hl; i++)
		if (!host_char(host[i]))
			return -EINVAL;
	memcpy(r->host, host, hl);
	r->host[hl] = '\0';
	unsigned long port = default_port;
	if (colon) {
		size_t pl = len - (size_t)(colon + 1 - s);
		if (pl == 0 || pl > 5)
			return -EINVAL;
		port = 0;
		for (size_t i = 0; i < pl; i++) {
			char c = colon[1 + i];
			if (c < '0' || c > '9')
				return -EINVAL;
			port = port * 10 + (unsigned long)(c - '0');
		}
	}
	if (port == 0 || port > 65535)
		return -EINVAL;
	r->port = (uint16_t)port;
	return 0;
}

/* Hop-by-hop headers the proxy drops: it sets "Connection: close" itself. */
static bool dropped_header(const char *line, size_t len)
{
	static const char *const names[] = {
	    "connection:", "proxy-connection:", "proxy-authorization:", "keep-alive:"};
	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		size_t nl = strlen(names[i]);
		if (len >= nl && strncasecmp(line, names[i], nl) == 0)
			return true;
	}
	return false;
}

int net_proxy_parse_http(const char *buf, size_t n, struct net_proxy_request *ret)
{
	*ret = (struct net_proxy_request){0};
	size_t lim = MIN(n, (size_t)NET_PROXY_HEAD_MAX);
	const char *end = NULL;
	for (size_t i = 0; i + 3 < lim; i++)
		if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' &&
		    buf[i + 3] == '\n') {
			end = buf + i;
			break;
		}
	if (!end)
		return n >= NET_PROXY_HEAD_MAX ? -E2BIG : -EAGAIN;
	ret->head_len = (size_t)(end - buf) + 4;
	for (const char *p = buf; p < end; p++)
		if (*p == '\0' || (*p == '\n' && (p == buf || p[-1] != '\r')) ||
		    (*p == '\r' && p[1] != '\n'))
			return -EINVAL; /* bare CR/LF or NUL: request smuggling material */
	const char *eol = memmem(buf, (size_t)(end - buf) + 2, "\r\n", 2);
	/* METHOD SP TARGET SP HTTP/1.x */
	const char *sp1 = memchr(buf, ' ', (size_t)(eol - buf));
	if (!sp1 || sp1 == buf)
		return -EINVAL;
	const char *target = sp1 + 1;
	const char *sp2 = memchr(target, ' ', (size_t)(eol - target));
	if (!sp2 || sp2 == target)
		return -EINVAL;
	size_t vl = (size_t)(eol - sp2 - 1);
	if (!(vl == 8 &&
	      (memcmp(sp2 + 1, "HTTP/1.1", 8) == 0 || memcmp(sp2 + 1, "HTTP/1.0", 8) == 0)))
		return -EINVAL;
	for (const char *p = buf; p < sp1; p++)
		if (!('A' <= *p && *p <= 'Z'))
			return -EINVAL;
	size_t ml = (size_t)(sp1 - buf), tl = (size_t)(sp2 - target);
	if (ml == 7 && memcmp(buf, "CONNECT", 7) == 0) {
		ret->kind = NET_PROXY_CONNECT;
		/* CONNECT needs a port; parse_authority's default 0 is refused. */
		return parse_authority(target, tl, 0, ret);
	}
	ret->kind = NET_PROXY_FORWARD;
	if (tl < 8 || strncasecmp(target, "http://", 7) != 0)
		return -EINVAL;
	const char *auth = target + 7;
	const char *path = memchr(auth, '/', (size_t)(sp2 - auth));
	const char *auth_end = path ? path : sp2;
	if (memchr(auth, '@', (size_t)(auth_end - auth)) ||
	    memchr(auth, '?', (size_t)(auth_end - auth)) ||
	    memchr(auth, '#', (size_t)(auth_end - auth)))
		return -EINVAL; /* no userinfo: "allowed.com@evil" must not confuse anyone */
	int r = parse_authority(auth, (size_t)(auth_end - auth), 80, ret);
	if (r < 0)
		return r;
	struct strbuf sb = STRBUF_INIT;
	strbuf_append(&sb, buf, ml + 1);
	if (path)
		strbuf_append(&sb, path, (size_t)(sp2 - path));
	else
		strbuf_appendc(&sb, '/');
	strbuf_append(&sb, sp2, (size_t)(eol - sp2) + 2);
	unsigned headers = 0;
	for (const char *line = eol + 2; line < end + 2;) {
		const char *le = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
		if (!le)
			break;
		if (++headers > NET_PROXY_HEADERS_MAX) {
			strbuf_free(&sb);
			return -E2BIG;
		}
		size_t ll = (size_t)(le - line);
		if (!memchr(line, ':', ll)) {
			strbuf_free(&sb);
			return -EINVAL;
		}
		if (!dropped_header(line, ll))
			strbuf_append(&sb, line, ll + 2);
		line = le + 2;
	}
	strbuf_appends(&sb, "Connection: close\r\n\r\n");
	if (sb.oom) {
		strbuf_free(&sb);
		return -ENOMEM;
	}
	ret->forward_len = sb.len;
	ret->forward = strbuf_steal(&sb);
	return ret->forward ? 0 : -ENOMEM;
}

int net_proxy_parse_socks_greeting(const uint8_t *buf, size_t n)
{
	if (n < 2)
		return -EAGAIN;
	if (buf[0] != 5 || buf[1] == 0)
		return -EINVAL;
	size_t len = 2 + (size_t)buf[1];
	if (n < len)
		return -EAGAIN;
	return memchr(buf + 2, 0, buf[1]) ? (int)len : -EPERM;
}

int net_proxy_parse_socks_request(const uint8_t *buf, size_t n, struct net_proxy_request *ret)
{
	*ret = (struct net_proxy_request){.kind = NET_PROXY_CONNECT};
	if (n < 5)
		return -EAGAIN;
	if (buf[0] != 5 || buf[2] != 0)
		return -EINVAL;
	size_t len;
	switch (buf[3]) {
	case 1: /* IPv4 */
		len = 4 + 4 + 2;
		if (n < len)
			return -EAGAIN;
		inet_ntop(AF_INET, buf + 4, ret->host, sizeof ret->host);
		break;
	case 3: /* a name */
		if (buf[4] == 0)
			return -EINVAL;
		len = 5 + (size_t)buf[4] + 2;
		if (n < len)
			return -EAGAIN;
		for (size_t i = 0; i < buf[4]; i++)
			if (!host_char((char)buf[5 + i]))
				return -EINVAL;
		memcpy(ret->host, buf + 5, buf[4]);
		ret->host[buf[4]] = '\0';
		break;
	case 4: /* IPv6 */
		len = 4 + 16 + 2;
		if (n < len)
			return -EAGAIN;
		inet_ntop(AF_INET6, buf + 4, ret->host, sizeof ret->host);
		break;
	default:
		return -EINVAL;
	}
	ret->port = (uint16_t)(buf[len - 2] << 8 | buf[len - 1]);
	if (ret->port == 0)
		return -EINVAL;
	if (buf[1] != 1)
		return -EOPNOTSUPP; /* BIND, UDP ASSOCIATE */
	ret->head_len = len;
	return (int)len;
}

/* ---- serving ---- */

struct conn {
	struct net_proxy *p;
	int fd, up;
	size_t slot;
};

struct net_proxy {
	struct net *net;
	int listen_fd;
	pthread_t acceptor;
	bool acceptor_started;
	pthread_mutex_t lock;
	pthread_cond_t idle;
	bool stopping;
	struct conn *conns[NET_PROXY_MAX_CONNS];
	size_t n_conns;
};

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Read more of the head, waiting at most until deadline. 0 on EOF, -ETIMEDOUT. */
static ssize_t read_until(int fd, void *buf, size_t n, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return -ETIMEDOUT;
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int k = poll(&pf, 1, (int)MIN(left, (int64_t)1000));
		if (k < 0 && errno != EINTR)
			return negative_errno();
		if (k <= 0)
			continue;
		ssize_t r = recv(fd, buf, n, 0);
		if (r >= 0 || (errno != EINTR && errno != EAGAIN))
			return r < 0 ? negative_errno() : r;
	}
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN) {
			struct pollfd pf = {.fd = fd, .events = POLLOUT};
			if (poll(&pf, 1, NET_PROXY_HEAD_TIMEOUT_S * 1000) <= 0)
				return -ETIMEDOUT;
			continue;
		}
		if (w <= 0)
			return -EPIPE;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Connect to an address the policy lets the proxy reach, within the head timeout. */
static int connect_upstream(struct net_proxy *p, const struct net_proxy_request *rq,
			    bool *ret_refused)
{
	char port[8];
	snprintf(port, sizeof port, "%u", rq->port);
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV},
			*res = NULL;
	if (getaddrinfo(rq->host, port, &hints, &res) != 0)
		return -EHOSTUNREACH;
	int fd = -ECONNREFUSED;
	*ret_refused = false;
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		if (!net_proxy_may_reach(p->net, rq->host, a->ai_addr)) {
			*ret_refused = true;
			continue;
		}
		int s = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (s < 0)
			continue;
		if (connect(s, a->ai_addr, a->ai_addrlen) < 0 && errno != EINPROGRESS) {
			close(s);
			continue;
		}
		struct pollfd pf = {.fd = s, .events = POLLOUT};
		int err = 0;
		socklen_t l = sizeof err;
		if (poll(&pf, 1, NET_PROXY_HEAD_TIMEOUT_S * 1000) == 1 &&
		    getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &l) == 0 && err == 0) {
			fd = s;
			*ret_refused = false;
			break;
		}
		close(s);
	}
	freeaddrinfo(res);
	return fd;
}

/* Copy both ways until both sides are done or the connection idles out. */
static void relay(int a, int b)
{
	char buf[65536];
	bool a_open = true, b_open = true;
	while (a_open || b_open) {
		struct pollfd pf[2] = {{.fd = a_open ? a : -1, .events = POLLIN},
				       {.fd = b_open ? b : -1, .events = POLLIN}};
		int k = poll(pf, 2, NET_PROXY_IDLE_TIMEOUT_S * 1000);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return;
		for (int i = 0; i < 2; i++) {
			if (!(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			int from = i ? b : a, to = i ? a : b;
			ssize_t r = recv(from, buf, sizeof buf, MSG_DONTWAIT);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (r <= 0 || write_all(to, buf, (size_t)r) < 0) {
				if (r < 0 || r > 0)
					return; /* an error: tear both down */
				(void)shutdown(to, SHUT_WR);
				if (i)
					b_open = false;
				else
					a_open = false;
			}
		}
	}
}

static void http_refuse(int fd, const char *status, const char *why)
{
	char msg[512];
	int n = snprintf(msg, sizeof msg,
			 "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: "
			 "close\r\nContent-Length: %zu\r\n\r\n%s\n",
			 status, strlen(why) + 1, why);
	if (n > 0)
		(void)write_all(fd, msg, MIN((size_t)n, sizeof msg - 1));
}

static void socks_reply(int fd, uint8_t code)
{
	uint8_t r[10] = {5, code, 0, 1, 0, 0, 0, 0, 0, 0};
	(void)write_all(fd, r, sizeof r);
}

static void serve(struct conn *c)
{
	struct net_proxy *p = c->p;
	char buf[NET_PROXY_HEAD_MAX];
	size_t have = 0;
	int64_t deadline = now_ms() + NET_PROXY_HEAD_TIMEOUT_S * 1000;
	struct net_proxy_request rq = {0};
	bool socks = false;
	int r = -EAGAIN;
	while (r == -EAGAIN) {
		ssize_t k = read_until(c->fd, buf + have, sizeof buf - have, deadline);
		if (k <= 0)
			return;
		have += (size_t)k;
		if ((uint8_t)buf[0] == 5) {
			socks = true;
			r = net_proxy_parse_socks_greeting((const uint8_t *)buf, have);
		} else {
			r = net_proxy_parse_http(buf, have, &rq);
		}
		if (r == -EAGAIN && have == sizeof buf)
			r = -E2BIG;
	}
	if (socks) {
		if (r < 0) {
			uint8_t no[2] = {5, 0xff};
			(void)write_all(c->fd, no, sizeof no);
			return;
		}
		size_t used = (size_t)r;
		uint8_t ok[2] = {5, 0};
		if (write_all(c->fd, ok, sizeof ok) < 0)
			return;
		memmove(buf, buf + used, have - used);
		have -= used;
		while ((r = net_proxy_parse_socks_request((const uint8_t *)buf, have, &rq)) ==
		       -EAGAIN) {
			ssize_t k = read_until(c->fd, buf + have, sizeof buf - have, deadline);
			if (k <= 0)
				return;
			have += (size_t)k;
		}
		if (r < 0) {
			socks_reply(c->fd, r == -EOPNOTSUPP ? 7 : 1);
			return;
		}
	} else if (r < 0) {
		http_refuse(c->fd,
			    r == -E2BIG ? "431 Request Header Fields Too Large" : "400 Bad Request",
			    "brokered proxy: malformed request");
		net_proxy_request_done(&rq);
		return;
	}

	const char *rule = NULL;
	enum net_verdict v = net_decide_host(p->net, rq.host, &rule);
	if (v == NET_PROMPT) {
		char what[300];
		snprintf(what, sizeof what, "net:%s", rq.host);
		net_record_prompt(p->net, what, "proxy", rule);
	}
	bool refused = v != NET_ALLOW;
	int up = -1;
	if (!refused) {
		up = connect_upstream(p, &rq, &refused);
	}
	if (refused || up < 0) {
		char why[400];
		snprintf(why, sizeof why, "brokered proxy: %s \"%s\" (%s)",
			 refused ? "not allowed:" : "cannot connect to", rq.host,
			 refused ? rule : strerror(-up));
		if (socks)
			socks_reply(c->fd, refused ? 2 : 5);
		else
			http_refuse(c->fd, refused ? "403 Forbidden" : "502 Bad Gateway", why);
		safe_close(up);
		net_proxy_request_done(&rq);
		return;
	}
	pthread_mutex_lock(&p->lock);
	c->up = up;
	pthread_mutex_unlock(&p->lock);
	int w = 0;
	if (socks)
		socks_reply(c->fd, 0);
	else if (rq.kind == NET_PROXY_CONNECT)
		w = write_all(c->fd, "HTTP/1.1 200 Connection established\r\n\r\n", 39);
	else
		w = write_all(up, rq.forward, rq.forward_len);
	/* Whatever the client sent after its head belongs to the upstream. */
	if (w >= 0 && have > rq.head_len)
		w = write_all(up, buf + rq.head_len, have - rq.head_len);
	net_proxy_request_done(&rq);
	if (w >= 0)
		relay(c->fd, up);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct net_proxy *p = c->p;
	serve(c);
	pthread_mutex_lock(&p->lock);
	p->conns[c->slot] = NULL;
	p->n_conns--;
	safe_close(c->up);
	close(c->fd);
	pthread_cond_broadcast(&p->idle);
	pthread_mutex_unlock(&p->lock);
	free(c);
	return NULL;
}

static void *acceptor_main(void *arg)
{
	struct net_proxy *p = arg;
	for (;;) {
		int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE ||
			    errno == ENFILE)
				continue;
			return NULL; /* shut down */
		}
		struct conn *c = calloc(1, sizeof *c);
		pthread_mutex_lock(&p->lock);
		size_t slot = 0;
		while (slot < NET_PROXY_MAX_CONNS && p->conns[slot])
			slot++;
		bool ok = c && !p->stopping && slot < NET_PROXY_MAX_CONNS;
		if (ok) {
			*c = (struct conn){.p = p, .fd = fd, .up = -1, .slot = slot};
			p->conns[slot] = c;
			p->n_conns++;
		}
		pthread_mutex_unlock(&p->lock);
		if (!ok) {
			close(fd); /* too many at once: the client sees the connection close */
			free(c);
			continue;
		}
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, conn_main, c) != 0) {
			pthread_mutex_lock(&p->lock);
			p->conns[slot] = NULL;
			p->n_conns--;
			pthread_mutex_unlock(&p->lock);
			close(fd);
			free(c);
		}
		pthread_attr_destroy(&attr);
	}
}

int net_proxy_start(struct net *n, struct net_proxy **ret)
{
	struct net_proxy *p = calloc(1, sizeof *p);
	if (!p)
		return -ENOMEM;
	p->net = n;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->idle, NULL);
	int r;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof a;
	p->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (p->listen_fd < 0 || bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) < 0 ||
	    listen(p->listen_fd, 128) < 0 ||
	    getsockname(p->listen_fd, (struct sockaddr *)&a, &al) < 0) {
		r = -errno;
		net_proxy_stop(p);
		return r;
	}
	/* The threads take no signals: brokered reads its own (SIGCHLD above all) from a signalfd,
	 * which sees only signals that every thread blocks. Connection threads inherit the mask. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	r = -pthread_create(&p->acceptor, NULL, acceptor_main, p);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r < 0) {
		net_proxy_stop(p);
		return r;
	}
	p->acceptor_started = true;
	n->proxy = a;
	*ret = p;
	return 0;
}

void net_proxy_stop(struct net_proxy *p)
{
	if (!p)
		return;
	if (p->listen_fd >= 0)
		(void)shutdown(p->listen_fd, SHUT_RDWR);
	if (p->acceptor_started)
		pthread_join(p->acceptor, NULL);
	pthread_mutex_lock(&p->lock);
	p->stopping = true;
	for (size_t i = 0; i < NET_PROXY_MAX_CONNS; i++)
		if (p->conns[i]) {
			(void)shutdown(p->conns[i]->fd, SHUT_RDWR);
			if (p->conns[i]->up >= 0)
				(void)shutdown(p->conns[i]->up, SHUT_RDWR);
		}
	while (p->n_conns)
		pthread_cond_wait(&p->idle, &p->lock);
	pthread_mutex_unlock(&p->lock);
	safe_close(p->listen_fd);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->idle);
	free(p);
}
