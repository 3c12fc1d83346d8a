/* SPDX-License-Identifier: MIT */
/*
 * Manifest records: the one on-disk line format of the store (pre-images, post-states, turn
 * metadata).
 *
 *   B1 k=file p=/w/a\x20b h=<64 hex> s=12 m=100644 u=0 g=0 t=1764618312000000000 x=1a2b3c4d\n
 *
 * A line is "B1", then space-separated key=value tokens, then "x=" and the CRC-32 (IEEE, 8
 * lowercase hex) of every byte before " x=". Values are escaped with escape_append(), so a
 * line never contains a space, '=' or newline inside a value and any path byte but NUL survives.
 * Keys: k kind (absent|file|dir|symlink|other), p path, h content hash, s size, m st_mode (octal,
 * type bits included), u uid, g gid, t mtime (ns), l symlink target, r rdev, i inode, n link
 * count (when > 1: undo gives hard-linked names one inode again), nb=1 not
 * backed up, mv=1 moved into the store, c tool call. Unknown keys are ignored (newer writers).
 *
 * Writers append a whole line with one write(2) (O_APPEND). A reader keeps only lines that end in
 * '\n' and whose checksum matches, so a torn or zero-filled tail after a crash is skipped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/alloc-util.h"
#include "basic/escape.h"
#include "basic/macro.h"
#include "basic/parse-util.h"
#include "basic/strbuf.h"
#include "store-internal.h"
#include "store.h"

#define RECORD_MAX_TOKENS 32

/* CRC-32 (IEEE) from tables built on first use, eight bytes a step ("slicing-by-8"): every record
 * is checksummed when it is written and again each time it is read, on the hot path. */
uint32_t store_crc32(const void *data, size_t n)
{
	static uint32_t table[8][256];
	static bool ready;
	if (!ready) {
		for (uint32_t i = 0; i < 256; i++) {
			uint32_t c = i;
			for (int k = 0; k < 8; k++)
				c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
			table[0][i] = c;
		}
		for (uint32_t i = 0; i < 256; i++)
			for (int t = 1; t < 8; t++)
				table[t][i] =
				    (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
		ready = true;
	}
	const unsigned char *p = data;
	uint32_t crc = 0xffffffffu;
	for (; n >= 8; p += 8, n -= 8) {
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
				     (uint32_t)p[3] << 24);
		crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
		      table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^ table[3][p[4]] ^
		      table[2][p[5]] ^ table[1][p[6]] ^ table[0][p[7]];
	}
	for (; n > 0; p++, n--)
		crc = (crc >> 8) ^ table[0][(crc ^ *p) & 0xff];
	return ~crc;
}

const char *store_kind_to_string(enum store_kind k)
{
	switch (k) {
	case STORE_KIND_ABSENT:
		return "absent";
	case STORE_KIND_FILE:
		return "file";
	case STORE_KIND_DIR:
		return "dir";
	case STORE_KIND_SYMLINK:
		return "symlink";
	case STORE_KIND_OTHER:
		return "other";
	}
	return "?";
}

static int kind_from_string(const char *s, enum store_kind *ret)
{
	for (enum store_kind k = STORE_KIND_ABSENT; k <= STORE_KIND_OTHER; k++)
		if (strcmp(s, store_kind_to_string(k)) == 0) {
			*ret = k;
			return 0;
		}
	return -EINVAL;
}

void store_record_done(struct store_record *r)
{
	if (!r)
		return;
	free(r->path);
	free(r->target);
	free(r->call);
	free(r->tree);
	*r = (struct store_record){0};
}

void store_records_free(struct store_record *r, size_t n)
{
	for (size_t i = 0; r && i < n; i++)
		store_record_done(&r[i]);
	free(r);
}

int store_line_begin(struct strbuf *out, size_t *ret_start)
{
	*ret_start = out->len;
	return strbuf_appends(out, "B1");
}

/* " key=" */
static int line_key(struct strbuf *out, const char *key)
{
	int r = strbuf_appendc(out, ' ');
	r = r < 0 ? r : strbuf_appends(out, key);
	return r < 0 ? r : strbuf_appendc(out, '=');
}

int store_line_kv(struct strbuf *out, const char *key, const char *value, size_t n)
{
	int r = line_key(out, key);
	return r < 0 ? r : escape_append(out, value, n);
}

int store_line_kvs(struct strbuf *out, const char *key, const char *value)
{
	return store_line_kv(out, key, value, strlen(value));
}

int store_line_kvu(struct strbuf *out, const char *key, uint64_t v)
{
	int r = line_key(out, key);
	return r < 0 ? r : strbuf_append_u64(out, v, 10, 0);
}

int store_line_end(struct strbuf *out, size_t start)
{
	if (out->oom)
		return -ENOMEM;
	uint32_t crc = store_crc32(out->buf + start, out->len - start);
	int r = strbuf_appends(out, " x=");
	r = r < 0 ? r : strbuf_append_u64(out, crc, 16, 8);
	return r < 0 ? r : strbuf_appendc(out, '\n');
}

int store_record_format(const struct store_record *r, struct strbuf *out)
{
	size_t start;
	int e = store_line_begin(out, &start);
	e = e < 0 ? e : store_line_kvs(out, "k", store_kind_to_string(r->kind));
	e = e < 0 ? e : store_line_kvs(out, "p", r->path);
	if (r->kind != STORE_KIND_ABSENT) {
		if (r->hash[0])
			e = e < 0 ? e : store_line_kvs(out, "h", r->hash);
		e = e < 0 ? e : store_line_kvu(out, "s", r->size);
		e = e < 0 ? e : line_key(out, "m");
		e = e < 0 ? e : strbuf_append_u64(out, r->mode, 8, 0);
		e = e < 0 ? e : store_line_kvu(out, "u", r->uid);
		e = e < 0 ? e : store_line_kvu(out, "g", r->gid);
		e = e < 0 ? e : line_key(out, "t");
		e = e < 0 ? e : strbuf_append_i64(out, r->mtime_ns);
		if (r->ino)
			e = e < 0 ? e : store_line_kvu(out, "i", r->ino);
		if (r->nlink > 1)
			e = e < 0 ? e : store_line_kvu(out, "n", r->nlink);
		if (r->rdev)
			e = e < 0 ? e : store_line_kvu(out, "r", r->rdev);
	}
	if (r->target)
		e = e < 0 ? e : store_line_kvs(out, "l", r->target);
	if (r->not_backed_up)
		e = e < 0 ? e : strbuf_appends(out, " nb=1");
	if (r->moved)
		e = e < 0 ? e : strbuf_appends(out, " mv=1");
	if (r->tree) {
		e = e < 0 ? e : store_line_kvs(out, "kt", r->tree);
		e = e < 0 ? e : store_line_kvu(out, "ka", r->tree_at);
	}
	if (r->call)
		e = e < 0 ? e : store_line_kvs(out, "c", r->call);
	return e < 0 ? e : store_line_end(out, start);
}

/* Split a line (without '\n') into tokens and verify the checksum. kv points into line. */
int store_line_split(char *line, size_t n, struct store_kv *kv, size_t max, size_t *ret_n)
{
	if (memchr(line, '\0', n))
		return -EBADMSG;
	const char *x = NULL;
	for (size_t i = n; i >= 3; i--)
		if (memcmp(line + i - 3, " x=", 3) == 0) {
			x = line + i - 3;
			break;
		}
	if (!x || n - (size_t)(x - line) != 3 + 8 || n < 2 || memcmp(line, "B1", 2) != 0)
		return -EBADMSG;
	char want[9];
	memcpy(want, x + 3, 8);
	want[8] = '\0';
	uint64_t crc;
	if (parse_u64(want, 16, &crc) < 0 || crc != store_crc32(line, (size_t)(x - line)))
		return -EBADMSG;
	line[x - line] = '\0';
	size_t k = 0;
	char *save = NULL;
	for (char *tok = strtok_r(line + 2, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq || k >= max)
			return -EBADMSG;
		*eq = '\0';
		kv[k].key = tok;
		kv[k].value = eq + 1;
		k++;
	}
	*ret_n = k;
	return 0;
}

int store_unescape_dup(const char *s, char **ret)
{
	struct strbuf sb = STRBUF_INIT;
	int r = unescape_append(&sb, s, strlen(s));
	if (r >= 0 && sb.len == 0)
		r = strbuf_reserve(&sb, 0);
	if (r < 0) {
		strbuf_free(&sb);
		return r;
	}
	*ret = strbuf_steal(&sb);
	return *ret ? 0 : -ENOMEM;
}

static bool hash_valid(const char *h)
{
	if (strlen(h) != 64)
		return false;
	for (const char *p = h; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

static int record_set(struct store_record *rec, const char *key, const char *v, bool *have_kind)
{
	uint64_t u;
	int64_t i;
	int r = 0;
	if (strcmp(key, "k") == 0) {
		r = kind_from_string(v, &rec->kind);
		*have_kind = r >= 0;
	} else if (strcmp(key, "p") == 0 && !rec->path) {
		r = store_unescape_dup(v, &rec->path);
	} else if (strcmp(key, "l") == 0 && !rec->target) {
		r = store_unescape_dup(v, &rec->target);
	} else if (strcmp(key, "c") == 0 && !rec->call) {
		r = store_unescape_dup(v, &rec->call);
	} else if (strcmp(key, "kt") == 0 && !rec->tree) {
		r = store_unescape_dup(v, &rec->tree);
	} else if (strcmp(key, "ka") == 0) {
		r = parse_u64(v, 10, &rec->tree_at);
	} else if (strcmp(key, "h") == 0) {
		if (!hash_valid(v))
			return -EBADMSG;
		memcpy(rec->hash, v, 65);
	} else if (strcmp(key, "s") == 0) {
		r = parse_u64(v, 10, &rec->size);
	} else if (strcmp(key, "i") == 0) {
		r = parse_u64(v, 10, &rec->ino);
	} else if (strcmp(key, "n") == 0) {
		r = parse_u64(v, 10, &rec->nlink);
	} else if (strcmp(key, "r") == 0) {
		r = parse_u64(v, 10, &rec->rdev);
	} else if (strcmp(key, "m") == 0 || strcmp(key, "u") == 0 || strcmp(key, "g") == 0) {
		r = parse_u64(v, key[0] == 'm' ? 8 : 10, &u);
		if (r >= 0 && u > UINT32_MAX)
			r = -ERANGE;
		if (r >= 0)
			*(key[0] == 'm'	  ? &rec->mode
			  : key[0] == 'u' ? &rec->uid
					  : &rec->gid) = (uint32_t)u;
	} else if (strcmp(key, "t") == 0) {
		r = parse_i64(v, 10, &i);
		rec->mtime_ns = i;
	} else if (strcmp(key, "nb") == 0) {
		rec->not_backed_up = strcmp(v, "1") == 0;
	} else if (strcmp(key, "mv") == 0) {
		rec->moved = strcmp(v, "1") == 0;
	}
	return r < 0 ? -EBADMSG : 0;
}

/* A record must be self-consistent. (Post-states of files have no hash: stat only.) */
static bool record_valid(const struct store_record *r)
{
	if (!r->path || r->path[0] != '/')
		return false;
	if (r->kind == STORE_KIND_SYMLINK && !r->target)
		return false;
	/* a kept tree's file: its tree is a name of the store, its root a parent of its path (or
	 * "", the file system's: a file kept by a move) */
	if (r->tree && (r->kind != STORE_KIND_FILE || !store_id_valid(r->tree) ||
			r->tree_at > strlen(r->path) ||
			(r->path[r->tree_at] != '\0' && r->path[r->tree_at] != '/')))
		return false;
	return true;
}

int store_record_parse_line(char *line, size_t n, struct store_record *ret)
{
	struct store_kv kv[RECORD_MAX_TOKENS];
	size_t nkv;
	int r = store_line_split(line, n, kv, ELEMENTSOF(kv), &nkv);
	if (r < 0)
		return r;
	struct store_record rec = {0};
	bool have_kind = false;
	for (size_t i = 0; i < nkv; i++) {
		r = record_set(&rec, kv[i].key, kv[i].value, &have_kind);
		if (r < 0)
			break;
	}
	if (r >= 0 && (!have_kind || !record_valid(&rec)))
		r = -EBADMSG;
	if (r < 0) {
		store_record_done(&rec);
		return r;
	}
	*ret = rec;
	return 0;
}

/*
 * The complete lines of buf[0..n), each record to fn in file order (a line is copied to *line,
 * reused, before it is split in place). Corrupt or unknown lines are counted in *bad. *ret_used:
 * the bytes up to and including the last '\n' (what follows is a torn tail, or the start of a line
 * the next read completes).
 */
static int manifest_lines(const char *buf, size_t n, char **line, size_t *bad, store_record_fn fn,
			  void *userdata, size_t *ret_used)
{
	size_t pos = 0;
	int r = 0;
	while (r >= 0 && pos < n) {
		const char *nl = memchr(buf + pos, '\n', n - pos);
		if (!nl)
			break;
		size_t len = (size_t)(nl - (buf + pos));
		char *tmp = realloc(*line, len + 1);
		if (!tmp) {
			r = -ENOMEM;
			break;
		}
		*line = tmp;
		memcpy(tmp, buf + pos, len);
		tmp[len] = '\0';
		pos += len + 1;
		struct store_record rec;
		if (len == 0)
			continue;
		if (store_record_parse_line(tmp, len, &rec) < 0) {
			(*bad)++;
			continue;
		}
		r = fn(&rec, userdata);
		store_record_done(&rec);
	}
	*ret_used = pos;
	return r;
}

int store_records_collect(struct store_record *rec, void *userdata)
{
	struct store_records_collector *c = userdata;
	if (c->keep && !c->keep(rec->path, c->userdata))
		return 0;
	if (ARRAY_GROW(c->v, c->cap, c->n, 16) < 0)
		return -ENOMEM;
	c->v[c->n++] = *rec;
	*rec = (struct store_record){0};
	return 0;
}

int store_manifest_parse(const char *buf, size_t n, struct store_record **ret, size_t *ret_n,
			 size_t *ret_bad)
{
	struct store_records_collector c = {0};
	_cleanup_free_ char *line = NULL;
	size_t bad = 0, used;
	int r = manifest_lines(buf, n, &line, &bad, store_records_collect, &c, &used);
	if (r < 0) {
		store_records_free(c.v, c.n);
		return r;
	}
	if (used < n) /* torn tail */
		bad++;
	*ret = c.v;
	*ret_n = c.n;
	if (ret_bad)
		*ret_bad = bad;
	return 0;
}

#define MANIFEST_CHUNK (64 * 1024)

int store_manifest_foreach_fd(int fd, size_t max, store_record_fn fn, void *userdata,
			      size_t *ret_bad)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	_cleanup_free_ char *line = NULL;
	size_t bad = 0, total = 0;
	int r = 0;
	for (;;) {
		if ((r = strbuf_reserve(&sb, MANIFEST_CHUNK)) < 0)
			return r;
		ssize_t k = RETRY_EINTR(read(fd, sb.buf + sb.len, sb.cap - sb.len - 1));
		if (k < 0)
			return negative_errno();
		if (k == 0)
			break;
		sb.len += (size_t)k;
		total += (size_t)k;
		if (total > max)
			return -EFBIG;
		size_t used;
		r = manifest_lines(sb.buf, sb.len, &line, &bad, fn, userdata, &used);
		if (r < 0)
			return r;
		memmove(sb.buf, sb.buf + used, sb.len - used);
		sb.len -= used;
	}
	if (sb.len) /* torn tail */
		bad++;
	if (ret_bad)
		*ret_bad = bad;
	return 0;
}
