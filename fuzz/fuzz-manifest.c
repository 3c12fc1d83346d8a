/* SPDX-License-Identifier: MIT */
/* libFuzzer target: the store's manifest parser, and format(parse(x)) must parse back the same;
 * streamed from a file, x gives the records and bad lines of the whole-buffer parse. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/strbuf.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count(struct store_record *rec, void *userdata)
{
	(void)rec;
	++*(size_t *)userdata;
	return 0;
}

static void check_stream(const uint8_t *data, size_t size, size_t n, size_t bad)
{
	int fd = memfd_create("manifest", MFD_CLOEXEC);
	size_t k = 0, sbad = 0;
	if (fd < 0)
		return;
	if (write(fd, data, size) == (ssize_t)size && lseek(fd, 0, SEEK_SET) == 0 &&
	    (store_manifest_foreach_fd(fd, SIZE_MAX, count, &k, &sbad) < 0 || k != n ||
	     sbad != bad))
		abort();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_record *v, *w;
	size_t n, m, bad;
	if (store_manifest_parse((const char *)data, size, &v, &n, &bad) < 0)
		return 0;
	check_stream(data, size, n, bad);
	struct strbuf sb = STRBUF_INIT;
	for (size_t i = 0; i < n; i++)
		if (store_record_format(&v[i], &sb) < 0)
			abort();
	if (store_manifest_parse(sb.buf ? sb.buf : "", sb.len, &w, &m, &bad) < 0)
		abort();
	if (m != n || bad != 0)
		abort();
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].path, w[i].path) != 0 || v[i].kind != w[i].kind ||
		    (v[i].kind != STORE_KIND_ABSENT &&
		     (v[i].size != w[i].size || strcmp(v[i].hash, w[i].hash) != 0)))
			abort();
	store_records_free(v, n);
	store_records_free(w, m);
	strbuf_free(&sb);
	return 0;
}
