/* SPDX-License-Identifier: MIT */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "basic/macro.h"
#include "basic/path-util.h"
#include "broker.h"
#include "policy.h"

/*
 * Sockets every program may reach because the C library itself does: name service lookups (nscd,
 * systemd's userdb for getpwnam) and the system log. None of them acts on files for the caller.
 */
static const char *const builtin_unix[] = {
    "/run/nscd/socket",
    "/run/systemd/userdb",
    "/run/systemd/journal/dev-log",
    "/run/systemd/journal/socket",
    "/run/systemd/journal/stdout",
    "/dev/log",
};

#define NET_MAX_PROMPTS 256
#define NET_MAX_GRANTS	1024

int net_new(const struct settings *s, const struct policy *p, const char *workspace,
	    const char *scratch, struct net **ret)
{
	struct net *n = calloc(1, sizeof *n);
	if (!n)
		return -ENOMEM;
	*n = (struct net){
	    .mode = s->net_mode,
	    .allow_localhost = s->net_allow_localhost,
	    .workspace = workspace,
	    .scratch = scratch,
	    .policy = p,
	    .allowed = s->net_allowed_domains,
	    .n_allowed = s->n_net_allowed_domains,
	    .denied = s->net_denied_domains,
	    .n_denied = s->n_net_denied_domains,
	    .unix_patterns = s->net_unix_sockets,
	    .n_unix_patterns = s->n_net_unix_sockets,
	};
	pthread_mutex_init(&n->lock, NULL);
	*ret = n;
	return 0;
}

void net_prompts_free(struct broker_prompt *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].op);
		free(v[i].rule);
	}
	free(v);
}

void net_free(struct net *n)
{
	if (!n)
		return;
	for (size_t i = 0; i < n->n_grants; i++)
		free(n->grants[i]);
	free(n->grants);
	net_prompts_free(n->prompts, n->n_prompts);
	pthread_mutex_destroy(&n->lock);
	free(n);
}

bool net_is_grant(const char *what)
{
	return (strncmp(what, "unix:/", 6) == 0 && what[6]) ||
	       (strncmp(what, "net:", 4) == 0 && what[4]);
}

int net_add_grant(struct net *n, const char *what)
{
	if (!net_is_grant(what) || strlen(what) >= BROKERED_PATH_MAX)
		return -EINVAL;
	char *d = strdup(what);
	if (!d)
		return -ENOMEM;
	pthread_mutex_lock(&n->lock);
	int r = 0;
	char **v = n->n_grants < NET_MAX_GRANTS
		       ? reallocarray(n->grants, n->n_grants + 1, sizeof *v)
		       : NULL;
	if (!v) {
		free(d);
		r = -ENOMEM;
	} else {
		v[n->n_grants++] = d;
		n->grants = v;
	}
	pthread_mutex_unlock(&n->lock);
	return r;
}

/* A grant "unix:DIR" covers sockets below DIR; "net:HOST" is a host name pattern. */
static bool granted(struct net *n, const char *kind, const char *what)
{
	size_t kl = strlen(kind);
	bool hit = false;
	pthread_mutex_lock(&n->lock);
	for (size_t i = 0; i < n->n_grants && !hit; i++) {
		const char *g = n->grants[i];
		if (strncmp(g, kind, kl) != 0)
			continue;
		hit =
		    kind[0] == 'u' ? path_is_under(what, g + kl) : net_domain_matches(g + kl, what);
	}
	pthread_mutex_unlock(&n->lock);
	return hit;
}

enum net_verdict net_decide_unix(struct net *n, const char *real, const char **ret_rule)
{
	if (path_is_under(real, n->workspace)) {
		*ret_rule = "default:workspace";
		return NET_ALLOW;
	}
	if (path_is_under(real, n->scratch)) {
		*ret_rule = "scratch";
		return NET_ALLOW;
	}
	for (size_t i = 0; i < n->n_unix_patterns; i++)
		if (policy_pattern_matches(n->policy, n->unix_patterns[i], real) > 0) {
			*ret_rule = "allowUnixSockets";
			return NET_ALLOW;
		}
	for (size_t i = 0; i < ELEMENTSOF(builtin_unix); i++)
		if (path_is_under(real, builtin_unix[i])) {
			*ret_rule = "default:system-service";
			return NET_ALLOW;
		}
	if (granted(n, "unix:", real)) {
		*ret_rule = "grant:user";
		return NET_ALLOW;
	}
	*ret_rule = "default:unix-socket";
	return NET_PROMPT;
}

bool net_may_bind_unix(struct net *n, const char *real, const char **ret_rule)
{
	if (path_is_under(real, n->scratch)) {
		*ret_rule = "scratch";
		return true;
	}
	return policy_check(n->policy, real, POLICY_ACCESS_WRITE, ret_rule) == POLICY_ALLOW;
}

static bool v4_is_local(uint32_t a)
{
	return (a >> 24) == 127 || a == 0;
}

bool net_addr_is_local(const struct sockaddr *addr, socklen_t len)
{
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		return v4_is_local(ntohl(((const struct sockaddr_in *)addr)->sin_addr.s_addr));
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)addr)->sin6_addr;
		if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a))
			return true;
		if (IN6_IS_ADDR_V4MAPPED(a)) {
			uint32_t v4;
			memcpy(&v4, &a->s6_addr[12], 4);
			return v4_is_local(ntohl(v4));
		}
	}
	return false;
}

/* Is addr the proxy (127.0.0.1:port, or the same as a v4-mapped IPv6 address)? */
static bool is_proxy(const struct net *n, const struct sockaddr *addr, socklen_t len)
{
	if (n->mode != SETTINGS_NET_PROXY || !n->proxy.sin_port)
		return false;
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)addr;
		return s->sin_port == n->proxy.sin_port &&
		       s->sin_addr.s_addr == n->proxy.sin_addr.s_addr;
	}
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)addr;
		return s->sin6_port == n->proxy.sin_port && IN6_IS_ADDR_V4MAPPED(&s->sin6_addr) &&
		       memcmp(&s->sin6_addr.s6_addr[12], &n->proxy.sin_addr.s_addr, 4) == 0;
	}
	return false;
}

enum net_verdict net_decide_inet(struct net *n, const struct sockaddr *addr, socklen_t len,
				 const char **ret_rule)
{
	if (n->mode == SETTINGS_NET_ALLOW) {
		*ret_rule = "network:allow";
		return NET_ALLOW;
	}
	if (is_proxy(n, addr, len)) {
		*ret_rule = "network:proxy";
		return NET_ALLOW;
	}
	if (n->allow_localhost && net_addr_is_local(addr, len)) {
		*ret_rule = "network:allowLocalhost";
		return NET_ALLOW;
	}
	*ret_rule = n->mode == SETTINGS_NET_PROXY ? "network:proxy-only" : "network:deny";
	return NET_DENY;
}

enum net_verdict net_decide_inet_bind(struct net *n, const struct sockaddr *addr, socklen_t len,
				      const char **ret_rule)
{
	if (n->mode == SETTINGS_NET_ALLOW) {
		*ret_rule = "network:allow";
		return NET_ALLOW;
	}
	/* A socket bound to a loopback address only hears the local host. */
	bool loopback = net_addr_is_local(addr, len);
	if (addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in))
		loopback = loopback && ((const struct sockaddr_in *)addr)->sin_addr.s_addr != 0;
	if (addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6))
		loopback = loopback && !IN6_IS_ADDR_UNSPECIFIED(
					   &((const struct sockaddr_in6 *)addr)->sin6_addr);
	if (n->allow_localhost && loopback) {
		*ret_rule = "network:allowLocalhost";
		return NET_ALLOW;
	}
	*ret_rule = n->mode == SETTINGS_NET_PROXY ? "network:proxy-only" : "network:deny";
	return NET_DENY;
}

bool net_domain_matches(const char *pattern, const char *host)
{
	size_t hl = strlen(host), pl = strlen(pattern);
	if (hl && host[hl - 1] == '.')
		hl--;
	if (pl && pattern[pl - 1] == '.')
		pl--;
	if (pl >= 2 && pattern[0] == '*' && pattern[1] == '.') {
		/* "*.example.com": a subdomain, not example.com itself */
		size_t sl = pl - 1; /* ".example.com" */
		return hl > sl && strncasecmp(host + hl - sl, pattern + 1, sl) == 0;
	}
	return hl == pl && strncasecmp(host, pattern, hl) == 0;
}

enum net_verdict net_decide_host(struct net *n, const char *host, const char **ret_rule)
{
	for (size_t i = 0; i < n->n_denied; i++)
		if (net_domain_matches(n->denied[i], host)) {
			*ret_rule = "deniedDomains";
			return NET_DENY;
		}
	for (size_t i = 0; i < n->n_allowed; i++)
		if (net_domain_matches(n->allowed[i], host)) {
			*ret_rule = "allowedDomains";
			return NET_ALLOW;
		}
	if (granted(n, "net:", host)) {
		*ret_rule = "grant:user";
		return NET_ALLOW;
	}
	*ret_rule = "default:proxy";
	return NET_PROMPT;
}

bool net_proxy_may_reach(const struct net *n, const char *host, const struct sockaddr *addr)
{
	socklen_t len =
	    addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return false;
	if (is_proxy(n, addr, len))
		return false; /* a loop through ourselves */
	if (!net_addr_is_local(addr, len))
		return true;
	/* A name that resolves to the local host (DNS rebinding, /etc/hosts) reaches local services
	 * only when the user allowed that: allowLocalhost, or the name "localhost" itself. */
	return n->allow_localhost || net_domain_matches("localhost", host);
}

void net_record_prompt(struct net *n, const char *what, const char *op, const char *rule)
{
	pthread_mutex_lock(&n->lock);
	bool found = false;
	for (size_t i = 0; i < n->n_prompts && !found; i++)
		found = strcmp(n->prompts[i].path, what) == 0;
	struct broker_prompt *v = NULL;
	if (!found && n->n_prompts < NET_MAX_PROMPTS)
		v = reallocarray(n->prompts, n->n_prompts + 1, sizeof *v);
	if (v) {
		n->prompts = v;
		struct broker_prompt *p = &v[n->n_prompts];
		*p = (struct broker_prompt){
		    .path = strdup(what), .op = strdup(op), .rule = strdup(rule)};
		if (p->path && p->op && p->rule)
			n->n_prompts++;
		else {
			free(p->path);
			free(p->op);
			free(p->rule);
		}
	}
	pthread_mutex_unlock(&n->lock);
}

struct broker_prompt *net_take_prompts(struct net *n, size_t *ret_n)
{
	pthread_mutex_lock(&n->lock);
	struct broker_prompt *v = n->prompts;
	*ret_n = n->n_prompts;
	n->prompts = NULL;
	n->n_prompts = 0;
	pthread_mutex_unlock(&n->lock);
	return v;
}
