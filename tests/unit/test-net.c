/* SPDX-License-Identifier: MIT */
/* The network policy (src/net.c), the settings keys that feed it, and the proxy's parsers. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "broker.h"
#include "net-proxy.h"
#include "net.h"
#include "policy.h"
#include "settings.h"

/* tap.h's is_int()/is_str() nest ok(), whose local shadows theirs. */
#pragma GCC diagnostic ignored "-Wshadow"
#include "tap.h"

#define WS	"/home/u/proj"
#define SCRATCH "/tmp/brokered-run"

static struct net *make(const char *json, struct settings **s, struct policy **p)
{
	struct settings_error err = {0};
	struct net *n = NULL;
	if (settings_new(s) < 0 ||
	    settings_load_buffer(*s, "t.json", json, strlen(json), &err) < 0 ||
	    policy_new(*s, WS, SCRATCH, "/home/u", "/home/u/.local/state/brokered", p, NULL) < 0 ||
	    net_new(*s, *p, WS, SCRATCH, &n) < 0) {
		printf("# setup failed: %s\n", err.message ? err.message : "?");
		exit(1);
	}
	settings_error_done(&err);
	return n;
}

static struct sockaddr_in v4(const char *ip, unsigned port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static struct sockaddr_in6 v6(const char *ip, unsigned port)
{
	struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port)};
	inet_pton(AF_INET6, ip, &a.sin6_addr);
	return a;
}

static void domains(void)
{
	static const struct {
		const char *pattern, *host;
		bool want;
	} t[] = {
	    {"example.com", "example.com", true},	{"example.com", "EXAMPLE.com.", true},
	    {"example.com", "www.example.com", false},	{"*.example.com", "www.example.com", true},
	    {"*.example.com", "a.b.example.com", true}, {"*.example.com", "example.com", false},
	    {"*.example.com", "badexample.com", false}, {"localhost", "localhost", true},
	    {"example.com", "example.co", false},	{"10.0.0.5", "10.0.0.5", true},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		ok(net_domain_matches(t[i].pattern, t[i].host) == t[i].want, "domain %s vs %s",
		   t[i].pattern, t[i].host);
}

static void decisions(void)
{
	struct settings *s;
	struct policy *p;
	const char *rule;
	struct net *n =
	    make("{\"sandbox\": {\"network\": {\"mode\": \"proxy\", \"allowedDomains\": "
		 "[\"*.example.com\", \"localhost\"], \"deniedDomains\": [\"bad.example.com\"], "
		 "\"allowUnixSockets\": [\"~/.run/*.sock\"]}}}",
		 &s, &p);
	is_int(n->mode, SETTINGS_NET_PROXY, "mode proxy parsed");
	is_int(net_decide_host(n, "api.example.com", &rule), NET_ALLOW, "allowed subdomain");
	is_int(net_decide_host(n, "bad.example.com", &rule), NET_DENY, "denied beats allowed");
	is_str(rule, "deniedDomains", "... by deniedDomains");
	is_int(net_decide_host(n, "other.org", &rule), NET_PROMPT, "other names: a prompt");
	net_record_prompt(n, "net:other.org", "proxy", rule);
	net_record_prompt(n, "net:other.org", "proxy", rule);
	ok(net_add_grant(n, "net:other.org") == 0, "grant net:other.org");
	is_int(net_decide_host(n, "other.org", &rule), NET_ALLOW, "granted name allowed");
	is_str(rule, "grant:user", "... as grant:user");
	ok(net_add_grant(n, "net:") < 0 && net_add_grant(n, "unix:relative") < 0 &&
	       net_add_grant(n, "x") < 0,
	   "malformed grants refused");
	size_t np;
	struct broker_prompt *v = net_take_prompts(n, &np);
	is_int(np, 1, "prompts merged per name");
	net_prompts_free(v, np);

	is_int(net_decide_unix(n, WS "/a.sock", &rule), NET_ALLOW, "socket in the workspace");
	is_int(net_decide_unix(n, SCRATCH "/x/a.sock", &rule), NET_ALLOW,
	       "socket in the scratch dir");
	is_int(net_decide_unix(n, "/home/u/.run/agent.sock", &rule), NET_ALLOW,
	       "allowUnixSockets with ~ and *");
	is_int(net_decide_unix(n, "/home/u/.run/sub/agent.sock", &rule), NET_PROMPT,
	       "* stays in one component");
	is_int(net_decide_unix(n, "/var/run/docker.sock", &rule), NET_PROMPT,
	       "the Docker socket: a prompt");
	is_int(net_decide_unix(n, "/run/systemd/userdb/io.systemd.Multiplexer", &rule), NET_ALLOW,
	       "name service sockets are allowed");
	ok(net_may_bind_unix(n, WS "/b.sock", &rule) && !net_may_bind_unix(n, "/etc/b.sock", &rule),
	   "bind: in the workspace, not in /etc");

	struct sockaddr_in lo = v4("127.0.0.1", 8080), ext = v4("93.184.216.34", 80);
	is_int(net_decide_inet(n, (struct sockaddr *)&lo, sizeof lo, &rule), NET_DENY,
	       "proxy: loopback refused");
	n->proxy = v4("127.0.0.1", 3128);
	struct sockaddr_in px = v4("127.0.0.1", 3128);
	struct sockaddr_in6 px6 = v6("::ffff:127.0.0.1", 3128);
	is_int(net_decide_inet(n, (struct sockaddr *)&px, sizeof px, &rule), NET_ALLOW,
	       "proxy: the proxy allowed");
	is_int(net_decide_inet(n, (struct sockaddr *)&px6, sizeof px6, &rule), NET_ALLOW,
	       "proxy: the proxy as v4-mapped IPv6");
	is_int(net_decide_inet(n, (struct sockaddr *)&ext, sizeof ext, &rule), NET_DENY,
	       "proxy: direct refused");
	ok(!net_proxy_may_reach(n, "localhost", (struct sockaddr *)&px),
	   "the proxy never connects to itself");
	ok(net_proxy_may_reach(n, "localhost", (struct sockaddr *)&lo),
	   "localhost by name reaches loopback");
	ok(!net_proxy_may_reach(n, "api.example.com", (struct sockaddr *)&lo),
	   "another name resolving to loopback does not");
	ok(net_proxy_may_reach(n, "api.example.com", (struct sockaddr *)&ext),
	   "a public address is fine");
	net_free(n);
	policy_free(p);
	settings_free(s);

	n = make("{\"sandbox.network.mode\": \"deny\", \"sandbox.network.allowLocalhost\": true}",
		 &s, &p);
	struct sockaddr_in6 lo6 = v6("::1", 80), any6 = v6("::", 80);
	struct sockaddr_in any = v4("0.0.0.0", 80);
	is_int(net_decide_inet(n, (struct sockaddr *)&lo, sizeof lo, &rule), NET_ALLOW,
	       "allowLocalhost: 127.0.0.1");
	is_int(net_decide_inet(n, (struct sockaddr *)&lo6, sizeof lo6, &rule), NET_ALLOW,
	       "allowLocalhost: ::1");
	is_int(net_decide_inet(n, (struct sockaddr *)&ext, sizeof ext, &rule), NET_DENY,
	       "deny: public refused");
	is_int(net_decide_inet_bind(n, (struct sockaddr *)&lo, sizeof lo, &rule), NET_ALLOW,
	       "bind loopback");
	is_int(net_decide_inet_bind(n, (struct sockaddr *)&any, sizeof any, &rule), NET_DENY,
	       "bind 0.0.0.0 refused");
	is_int(net_decide_inet_bind(n, (struct sockaddr *)&any6, sizeof any6, &rule), NET_DENY,
	       "bind :: refused");
	net_free(n);
	policy_free(p);
	settings_free(s);
}

static void settings_errors(void)
{
	static const char *const bad[] = {
	    "{\"sandbox\": {\"network\": {\"mode\": \"open\"}}}",
	    "{\"sandbox\": {\"network\": {\"mode\": \"Proxy\"}}}",
	    "{\"sandbox\": {\"network\": {\"mode\": \"\"}}}",
	    "{\"sandbox\": {\"network\": {\"allowedDomains\": [\"exa mple.com\"]}}}",
	    "{\"sandbox\": {\"network\": {\"allowedDomains\": \"example.com\"}}}",
	    "{\"sandbox\": {\"network\": {\"allowedDomains\": [\"a/b\"]}}}",
	    "{\"sandbox\": {\"network\": {\"allowLocalhost\": \"yes\"}}}",
	    "{\"sandbox\": {\"network\": {\"allowUnixSockets\": [\"~other/x\"]}}}",
	    "{\"sandbox\": {\"network\": {\"mode\": \"deny\"}}, \"sandbox.network.mode\": "
	    "\"allow\"}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct settings *s;
		struct settings_error err = {0};
		settings_new(&s);
		int r = settings_load_buffer(s, "t.json", bad[i], strlen(bad[i]), &err);
		ok(r == -EINVAL && err.message && strstr(err.message, "sandbox.network."),
		   "refused: %s (%s)", bad[i], err.message ? err.message : "no message");
		is_int(s->net_mode, SETTINGS_NET_ALLOW, "... and nothing changed");
		settings_error_done(&err);
		settings_free(s);
	}
}

static void parsers(void)
{
	struct net_proxy_request r;
	const char *get = "GET http://Example.com:8080/a?b HTTP/1.1\r\nHost: example.com\r\n"
			  "Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\n\r\nBODY";
	is_int(net_proxy_parse_http(get, strlen(get), &r), 0, "GET absolute-form parsed");
	is_str(r.host, "Example.com", "host");
	is_int(r.port, 8080, "port");
	is_int(r.head_len, strlen(get) - 4, "head length stops at the empty line");
	is_str(r.forward, "GET /a?b HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
	       "forwarded head: origin-form, hop-by-hop headers replaced");
	net_proxy_request_done(&r);
	const char *con = "CONNECT [::1]:443 HTTP/1.1\r\n\r\n";
	ok(net_proxy_parse_http(con, strlen(con), &r) == 0 && r.kind == NET_PROXY_CONNECT &&
	       strcmp(r.host, "::1") == 0 && r.port == 443,
	   "CONNECT [::1]:443");
	net_proxy_request_done(&r);
	static const char *const bad[] = {
	    "CONNECT example.com HTTP/1.1\r\n\r\n",    "GET https://x/ HTTP/1.1\r\n\r\n",
	    "GET http://a@b/ HTTP/1.1\r\n\r\n",	       "GET http://x/ HTTP/2\r\n\r\n",
	    "GET http://x:99999/ HTTP/1.1\r\n\r\n",    "GET http://x/ HTTP/1.1\r\nbad\r\n\r\n",
	    "GET http://x/ HTTP/1.1\nHost: y\r\n\r\n", "get http://x/ HTTP/1.1\r\n\r\n",
	    "GET http://::1/ HTTP/1.1\r\n\r\n",	       "GET http://x\r/ HTTP/1.1\r\n\r\n",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		is_int(net_proxy_parse_http(bad[i], strlen(bad[i]), &r), -EINVAL,
		       "malformed refused (%zu)", i);
		net_proxy_request_done(&r);
	}
	is_int(net_proxy_parse_http("GET http://x/ HTTP/1.1\r\n", 24, &r), -EAGAIN,
	       "incomplete: read more");
	char *big = malloc(NET_PROXY_HEAD_MAX + 10);
	memset(big, 'a', NET_PROXY_HEAD_MAX + 10);
	is_int(net_proxy_parse_http(big, NET_PROXY_HEAD_MAX + 10, &r), -E2BIG,
	       "over the head limit");
	free(big);

	const uint8_t greet[] = {5, 2, 2, 0}, noauth[] = {5, 1, 2};
	is_int(net_proxy_parse_socks_greeting(greet, sizeof greet), 4,
	       "SOCKS greeting with no-auth");
	is_int(net_proxy_parse_socks_greeting(noauth, sizeof noauth), -EPERM,
	       "SOCKS greeting without it");
	const uint8_t req[] = {5,   1,	 0,   3,   9,	'l', 'o',  'c',
			       'a', 'l', 'h', 'o', 's', 't', 0x1f, 0x90};
	ok(net_proxy_parse_socks_request(req, sizeof req, &r) == (int)sizeof req &&
	       strcmp(r.host, "localhost") == 0 && r.port == 8080,
	   "SOCKS CONNECT localhost:8080");
	is_int(net_proxy_parse_socks_request(req, sizeof req - 1, &r), -EAGAIN,
	       "SOCKS request incomplete");
	const uint8_t bind[] = {5, 2, 0, 1, 127, 0, 0, 1, 0, 80};
	is_int(net_proxy_parse_socks_request(bind, sizeof bind, &r), -EOPNOTSUPP,
	       "SOCKS BIND refused");
	const uint8_t slash[] = {5, 1, 0, 3, 3, 'a', '/', 'b', 0, 80};
	is_int(net_proxy_parse_socks_request(slash, sizeof slash, &r), -EINVAL,
	       "SOCKS name with '/' refused");
}

int main(void)
{
	domains();
	decisions();
	settings_errors();
	parsers();
	return tap_done();
}
