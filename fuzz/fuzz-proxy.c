/* SPDX-License-Identifier: MIT */
/* libFuzzer target for the proxy's request parsers (src/net-proxy.c): HTTP heads and SOCKS5. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net-proxy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What the proxy relies on when it accepts a request. */
static void check(const struct net_proxy_request *r, size_t size)
{
	size_t hl = strnlen(r->host, sizeof r->host);
	if (hl == 0 || hl >= sizeof r->host || r->port == 0 || r->head_len > size)
		abort();
	for (size_t i = 0; i < hl; i++)
		if (r->host[i] == '/' || r->host[i] == '@' || r->host[i] == ' ' ||
		    r->host[i] < 0x21)
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_proxy_request r;
	int k = net_proxy_parse_http((const char *)data, size, &r);
	if (k == 0) {
		check(&r, size);
		if (r.kind == NET_PROXY_FORWARD) {
			/* the head sent upstream: origin-form, one request, closed after it */
			if (!r.forward || r.forward_len < 4 ||
			    memchr(r.forward, '\0', r.forward_len) ||
			    memcmp(r.forward + r.forward_len - 4, "\r\n\r\n", 4) != 0 ||
			    !memmem(r.forward, r.forward_len, "\r\nConnection: close\r\n\r\n", 23))
				abort();
			const char *sp = memchr(r.forward, ' ', r.forward_len);
			if (!sp || sp[1] != '/')
				abort();
			/* nothing after the first empty line */
			const char *end = memmem(r.forward, r.forward_len, "\r\n\r\n", 4);
			if (!end || (size_t)(end - r.forward) + 4 != r.forward_len)
				abort();
		}
	} else if (k != -EAGAIN && k != -E2BIG && k != -EINVAL && k != -ENOMEM) {
		abort();
	}
	net_proxy_request_done(&r);

	int g = net_proxy_parse_socks_greeting(data, size);
	if (g > 0 && (size_t)g > size)
		abort();
	k = net_proxy_parse_socks_request(data, size, &r);
	if (k > 0) {
		if ((size_t)k > size)
			abort();
		check(&r, size);
	}
	return 0;
}
