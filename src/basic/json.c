/* SPDX-License-Identifier: MIT */
#include "json.h"
#include "utf8.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hexdecoct.h"
#include "macro.h"
#include "strbuf.h"
#include "string-table.h"

struct json_member {
	char *key;
	size_t key_len;
	size_t key_pos; /* offset of the key in the input, for "duplicate key" */
	struct json_value *value;
};

struct json_value {
	enum json_type type;
	union {
		bool b;
		int64_t i;
		double d;
		struct {
			char *s;
			size_t len;
		} str;
		struct {
			struct json_value **items;
			size_t n;
		} arr;
		struct {
			struct json_member *m;
			size_t n;
			size_t *sorted; /* member indices sorted by key, for lookup */
		} obj;
	} u;
};

struct parser {
	const char *buf;
	size_t n;
	size_t pos;
	unsigned depth;
	unsigned max_depth;
	unsigned flags;
	/* first error */
	size_t err_pos;
	const char *reason;
};

static int fail_at(struct parser *p, size_t pos, int r, const char *reason)
{
	if (!p->reason) {
		p->err_pos = pos;
		p->reason = reason;
	}
	return r;
}

static int fail(struct parser *p, const char *reason)
{
	return fail_at(p, p->pos, -EINVAL, reason);
}

static bool at_end(const struct parser *p)
{
	return p->pos >= p->n;
}

static int skip_comment(struct parser *p)
{
	size_t start = p->pos;
	if (p->pos + 1 >= p->n)
		return fail(p, "unexpected character");
	char c = p->buf[p->pos + 1];
	if (c == '/') {
		const char *nl = memchr(p->buf + p->pos, '\n', p->n - p->pos);
		p->pos = nl ? (size_t)(nl - p->buf) + 1 : p->n;
		return 0;
	}
	if (c != '*')
		return fail(p, "unexpected character");
	for (size_t i = p->pos + 2; i + 1 < p->n; i++)
		if (p->buf[i] == '*' && p->buf[i + 1] == '/') {
			p->pos = i + 2;
			return 0;
		}
	return fail_at(p, start, -EINVAL, "unterminated comment");
}

static int skip_ws(struct parser *p)
{
	while (!at_end(p)) {
		char c = p->buf[p->pos];
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
			p->pos++;
		else if (c == '/' && (p->flags & JSON_ALLOW_COMMENTS)) {
			int r = skip_comment(p);
			if (r < 0)
				return r;
		} else
			break;
	}
	return 0;
}

static struct json_value *value_new(enum json_type t)
{
	struct json_value *v = calloc(1, sizeof(*v));
	if (v)
		v->type = t;
	return v;
}

static void value_freep(struct json_value **v)
{
	json_free(*v);
}

/* ---- strings ---- */

static int hex4(struct parser *p, size_t at, uint32_t *ret)
{
	if (at + 4 > p->n)
		return fail_at(p, at, -EINVAL, "truncated \\u escape");
	uint32_t v = 0;
	for (size_t i = at; i < at + 4; i++) {
		int d = unhexchar(p->buf[i]);
		if (d < 0)
			return fail_at(p, i, -EINVAL, "invalid \\u escape");
		v = v << 4 | (uint32_t)d;
	}
	*ret = v;
	return 0;
}

static int append_utf8(struct strbuf *sb, uint32_t cp)
{
	char o[4];
	size_t n;
	if (cp < 0x80) {
		o[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		o[0] = (char)(0xf0 | cp >> 18);
		o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		o[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	return strbuf_append(sb, o, n);
}

/* p->pos is just after "\u". Decodes one code point, joining a surrogate pair. */
static int parse_u_escape(struct parser *p, struct strbuf *sb)
{
	size_t start = p->pos - 2;
	uint32_t cp, lo;
	int r = hex4(p, p->pos, &cp);
	if (r < 0)
		return r;
	p->pos += 4;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return fail_at(p, start, -EINVAL, "lone low surrogate");
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (p->pos + 2 > p->n || p->buf[p->pos] != '\\' || p->buf[p->pos + 1] != 'u')
			return fail_at(p, start, -EINVAL, "lone high surrogate");
		r = hex4(p, p->pos + 2, &lo);
		if (r < 0)
			return r;
		if (lo < 0xdc00 || lo > 0xdfff)
			return fail_at(p, start, -EINVAL, "lone high surrogate");
		p->pos += 6;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp == 0)
		return fail_at(p, start, -EINVAL, "\\u0000 not allowed in strings");
	r = append_utf8(sb, cp);
	return r < 0 ? fail_at(p, start, r, "out of memory") : 0;
}

static int parse_escape(struct parser *p, struct strbuf *sb)
{
	/* p->pos is at the backslash */
	if (p->pos + 1 >= p->n)
		return fail(p, "unterminated string");
	char c = p->buf[p->pos + 1], o;
	switch (c) {
	case '"':
	case '\\':
	case '/':
		o = c;
		break;
	case 'b':
		o = '\b';
		break;
	case 'f':
		o = '\f';
		break;
	case 'n':
		o = '\n';
		break;
	case 'r':
		o = '\r';
		break;
	case 't':
		o = '\t';
		break;
	case 'u':
		p->pos += 2;
		return parse_u_escape(p, sb);
	default:
		return fail(p, "invalid escape");
	}
	p->pos += 2;
	int r = strbuf_appendc(sb, o);
	return r < 0 ? fail(p, "out of memory") : 0;
}

/* p->pos is at the opening quote. Returns the decoded bytes (malloc'd, NUL-terminated). */
static int parse_string_raw(struct parser *p, char **ret, size_t *ret_len)
{
	_cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
	size_t start = p->pos++;
	int r;
	for (;;) {
		if (at_end(p))
			return fail_at(p, start, -EINVAL, "unterminated string");
		unsigned char c = (unsigned char)p->buf[p->pos];
		if (c == '"')
			break;
		if (c == '\\') {
			if ((r = parse_escape(p, &sb)) < 0)
				return r;
			continue;
		}
		if (c < 0x20)
			return fail(p, "control character in string");
		size_t len = 1;
		if (c >= 0x80 && !(p->flags & JSON_ALLOW_RAW_BYTES)) {
			len = utf8_seq_len((const unsigned char *)p->buf + p->pos, p->n - p->pos);
			if (len == 0)
				return fail(p, "invalid UTF-8 in string");
		}
		if (strbuf_append(&sb, p->buf + p->pos, len) < 0)
			return fail(p, "out of memory");
		p->pos += len;
	}
	p->pos++; /* closing quote */
	size_t len = sb.len;
	char *s = strbuf_steal(&sb);
	if (!s)
		return fail(p, "out of memory");
	*ret = s;
	*ret_len = len;
	return 0;
}

/* ---- numbers ---- */

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void c_locale_init(void)
{
	c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static size_t scan_digits(const struct parser *p, size_t i)
{
	while (i < p->n && p->buf[i] >= '0' && p->buf[i] <= '9')
		i++;
	return i;
}

/* Digits of an integral token into int64_t; false on overflow. */
static bool integral_to_i64(const char *s, size_t n, int64_t *ret)
{
	bool neg = s[0] == '-';
	uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX, v = 0;
	for (size_t i = neg; i < n; i++) {
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (limit - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*ret = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
	return true;
}

static int parse_number(struct parser *p, struct json_value **ret)
{
	size_t start = p->pos, i = p->pos;
	bool integral = true;
	if (i < p->n && p->buf[i] == '-')
		i++;
	if (i >= p->n || p->buf[i] < '0' || p->buf[i] > '9')
		return fail_at(p, i, -EINVAL, "invalid number");
	if (p->buf[i] == '0') {
		i++;
		if (i < p->n && p->buf[i] >= '0' && p->buf[i] <= '9')
			return fail_at(p, i, -EINVAL, "leading zero in number");
	} else
		i = scan_digits(p, i);
	if (i < p->n && p->buf[i] == '.') {
		integral = false;
		size_t j = scan_digits(p, i + 1);
		if (j == i + 1)
			return fail_at(p, j, -EINVAL, "digit expected after '.'");
		i = j;
	}
	if (i < p->n && (p->buf[i] == 'e' || p->buf[i] == 'E')) {
		integral = false;
		i++;
		if (i < p->n && (p->buf[i] == '+' || p->buf[i] == '-'))
			i++;
		size_t j = scan_digits(p, i);
		if (j == i)
			return fail_at(p, j, -EINVAL, "digit expected in exponent");
		i = j;
	}
	struct json_value *v = value_new(JSON_INT);
	if (!v)
		return fail(p, "out of memory");
	if (integral && integral_to_i64(p->buf + start, i - start, &v->u.i)) {
		p->pos = i;
		*ret = v;
		return 0;
	}
	/* Not an int64: convert in the C locale, whatever the program's locale says. */
	_cleanup_free_ char *tok = strndup(p->buf + start, i - start);
	pthread_once(&c_locale_once, c_locale_init);
	if (!tok || !c_locale) {
		free(v);
		return fail(p, "out of memory");
	}
	v->type = JSON_DOUBLE;
	v->u.d = strtod_l(tok, NULL, c_locale);
	if (!isfinite(v->u.d)) {
		free(v);
		return fail_at(p, start, -ERANGE, "number out of range");
	}
	p->pos = i;
	*ret = v;
	return 0;
}

/* ---- containers ---- */

static int parse_value(struct parser *p, struct json_value **ret);

static int grow(void **items, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 4;
	if (nc > SIZE_MAX / size)
		return -ENOMEM;
	void *m = realloc(*items, nc * size);
	if (!m)
		return -ENOMEM;
	*items = m;
	*cap = nc;
	return 0;
}

static int enter(struct parser *p)
{
	if (p->depth >= p->max_depth)
		return fail_at(p, p->pos, -ELOOP, "nesting too deep");
	p->depth++;
	p->pos++; /* '[' or '{' */
	return 0;
}

/* After a ',': true if the container closes here (a trailing comma, when allowed). */
static int after_comma(struct parser *p, char close, bool *ret_closed)
{
	int r = skip_ws(p);
	if (r < 0)
		return r;
	*ret_closed = false;
	if (!at_end(p) && p->buf[p->pos] == close) {
		if (!(p->flags & JSON_ALLOW_TRAILING_COMMAS))
			return fail(p, "trailing comma");
		*ret_closed = true;
	}
	return 0;
}

/* Expect ',' or close after an element; *ret_done when closed. */
static int next_or_close(struct parser *p, char close, bool *ret_done)
{
	int r = skip_ws(p);
	if (r < 0)
		return r;
	if (at_end(p))
		return fail(p, "unexpected end of input");
	char c = p->buf[p->pos];
	if (c == close) {
		p->pos++;
		*ret_done = true;
		return 0;
	}
	if (c != ',')
		return fail(p, close == ']' ? "',' or ']' expected" : "',' or '}' expected");
	p->pos++;
	bool closed;
	if ((r = after_comma(p, close, &closed)) < 0)
		return r;
	if (closed)
		p->pos++;
	*ret_done = closed;
	return 0;
}

/* After '[' or '{': a new value of type, one level deeper; *ret_done when it closes at once. */
static int open_container(struct parser *p, enum json_type type, char close,
			  struct json_value **ret, bool *ret_done)
{
	_cleanup_(value_freep) struct json_value *v = value_new(type);
	if (!v)
		return fail(p, "out of memory");
	int r = enter(p);
	if (r < 0 || (r = skip_ws(p)) < 0)
		return r;
	*ret_done = !at_end(p) && p->buf[p->pos] == close;
	if (*ret_done)
		p->pos++;
	*ret = TAKE_PTR(v);
	return 0;
}

static int parse_array(struct parser *p, struct json_value **ret)
{
	_cleanup_(value_freep) struct json_value *v = NULL;
	size_t cap = 0;
	bool done;
	int r = open_container(p, JSON_ARRAY, ']', &v, &done);
	if (r < 0)
		return r;
	while (!done) {
		if (grow((void **)&v->u.arr.items, &cap, v->u.arr.n, sizeof(*v->u.arr.items)) < 0)
			return fail(p, "out of memory");
		if ((r = parse_value(p, &v->u.arr.items[v->u.arr.n])) < 0)
			return r;
		v->u.arr.n++;
		if ((r = next_or_close(p, ']', &done)) < 0)
			return r;
	}
	p->depth--;
	*ret = TAKE_PTR(v);
	return 0;
}

static int key_cmp(const struct json_member *a, const struct json_member *b)
{
	int c = memcmp(a->key, b->key, MIN(a->key_len, b->key_len));
	if (c)
		return c;
	return a->key_len < b->key_len ? -1 : a->key_len > b->key_len;
}

static int index_cmp(const void *x, const void *y, void *arg)
{
	const struct json_member *m = arg;
	size_t a = *(const size_t *)x, b = *(const size_t *)y;
	int c = key_cmp(&m[a], &m[b]);
	return c ? c : (a > b) - (a < b);
}

/* Sort the lookup index and refuse duplicate keys (reported at the later occurrence). */
static int index_object(struct parser *p, struct json_value *v)
{
	size_t n = v->u.obj.n;
	if (n == 0)
		return 0;
	v->u.obj.sorted = calloc(n, sizeof(size_t));
	if (!v->u.obj.sorted)
		return fail(p, "out of memory");
	for (size_t i = 0; i < n; i++)
		v->u.obj.sorted[i] = i;
	qsort_r(v->u.obj.sorted, n, sizeof(size_t), index_cmp, v->u.obj.m);
	for (size_t i = 1; i < n; i++) {
		const struct json_member *a = &v->u.obj.m[v->u.obj.sorted[i - 1]];
		const struct json_member *b = &v->u.obj.m[v->u.obj.sorted[i]];
		if (key_cmp(a, b) == 0)
			return fail_at(p, MAX(a->key_pos, b->key_pos), -EINVAL, "duplicate key");
	}
	return 0;
}

static int parse_member(struct parser *p, struct json_member *m)
{
	int r;
	if (at_end(p) || p->buf[p->pos] != '"')
		return fail(p, at_end(p) ? "unexpected end of input" : "string key expected");
	m->key_pos = p->pos;
	if ((r = parse_string_raw(p, &m->key, &m->key_len)) < 0)
		return r;
	if ((r = skip_ws(p)) < 0)
		return r;
	if (at_end(p) || p->buf[p->pos] != ':')
		return fail(p, "':' expected");
	p->pos++;
	return parse_value(p, &m->value);
}

static int parse_object(struct parser *p, struct json_value **ret)
{
	_cleanup_(value_freep) struct json_value *v = NULL;
	size_t cap = 0;
	bool done;
	int r = open_container(p, JSON_OBJECT, '}', &v, &done);
	if (r < 0)
		return r;
	while (!done) {
		if (grow((void **)&v->u.obj.m, &cap, v->u.obj.n, sizeof(*v->u.obj.m)) < 0)
			return fail(p, "out of memory");
		struct json_member *m = &v->u.obj.m[v->u.obj.n];
		*m = (struct json_member){0};
		r = parse_member(p, m);
		if (m->key)
			v->u.obj.n++; /* owned by v from here, also on failure */
		if (r < 0)
			return r;
		if ((r = next_or_close(p, '}', &done)) < 0)
			return r;
	}
	if ((r = index_object(p, v)) < 0)
		return r;
	p->depth--;
	*ret = TAKE_PTR(v);
	return 0;
}

static int parse_literal(struct parser *p, const char *word, struct json_value **ret)
{
	size_t n = strlen(word);
	if (p->n - p->pos < n || memcmp(p->buf + p->pos, word, n) != 0)
		return fail(p, "unexpected character");
	struct json_value *v = value_new(word[0] == 'n' ? JSON_NULL : JSON_BOOL);
	if (!v)
		return fail(p, "out of memory");
	v->u.b = word[0] == 't';
	p->pos += n;
	*ret = v;
	return 0;
}

static int parse_string_value(struct parser *p, struct json_value **ret)
{
	struct json_value *v = value_new(JSON_STRING);
	if (!v)
		return fail(p, "out of memory");
	int r = parse_string_raw(p, &v->u.str.s, &v->u.str.len);
	if (r < 0) {
		free(v);
		return r;
	}
	*ret = v;
	return 0;
}

static int parse_value(struct parser *p, struct json_value **ret)
{
	int r = skip_ws(p);
	if (r < 0)
		return r;
	if (at_end(p))
		return fail(p, "unexpected end of input");
	switch (p->buf[p->pos]) {
	case '{':
		return parse_object(p, ret);
	case '[':
		return parse_array(p, ret);
	case '"':
		return parse_string_value(p, ret);
	case 't':
		return parse_literal(p, "true", ret);
	case 'f':
		return parse_literal(p, "false", ret);
	case 'n':
		return parse_literal(p, "null", ret);
	case '-':
	case '0' ... '9':
		return parse_number(p, ret);
	default:
		return fail(p, "unexpected character");
	}
}

static void fill_error(const struct parser *p, int r, struct json_error *err)
{
	if (!err)
		return;
	size_t pos = MIN(p->err_pos, p->n);
	unsigned line = 1, col = 1;
	for (size_t i = 0; i < pos; i++) {
		if (p->buf[i] == '\n') {
			line++;
			col = 1;
		} else if (col < UINT32_MAX)
			col++;
	}
	*err = (struct json_error){
	    .offset = p->err_pos,
	    .line = line,
	    .column = col,
	    .reason = p->reason	     ? p->reason
		      : r == -ENOMEM ? "out of memory"
				     : "invalid JSON",
	};
}

int json_parse(const char *buf, size_t n, const struct json_limits *limits, struct json_value **ret,
	       struct json_error *err)
{
	struct json_limits l = limits ? *limits : (struct json_limits){0};
	struct parser p = {
	    .buf = buf,
	    .n = n,
	    .max_depth = MIN(l.max_depth ? l.max_depth : JSON_DEPTH_DEFAULT, JSON_DEPTH_MAX),
	    .flags = l.flags,
	};
	size_t max_size = l.max_size ? l.max_size : JSON_SIZE_DEFAULT;
	struct json_value *v = NULL;
	int r;

	if (n > max_size) {
		r = fail_at(&p, max_size, -E2BIG, "input too large");
		p.n = max_size;
		goto error;
	}
	if ((r = parse_value(&p, &v)) < 0)
		goto error;
	if ((r = skip_ws(&p)) < 0)
		goto error;
	if (!at_end(&p)) {
		r = fail(&p, "trailing data after JSON value");
		goto error;
	}
	*ret = v;
	return 0;
error:
	json_free(v);
	fill_error(&p, r, err);
	return r;
}

void json_free(struct json_value *v)
{
	if (!v)
		return;
	switch (v->type) {
	case JSON_STRING:
		free(v->u.str.s);
		break;
	case JSON_ARRAY:
		for (size_t i = 0; i < v->u.arr.n; i++)
			json_free(v->u.arr.items[i]);
		free(v->u.arr.items);
		break;
	case JSON_OBJECT:
		for (size_t i = 0; i < v->u.obj.n; i++) {
			free(v->u.obj.m[i].key);
			json_free(v->u.obj.m[i].value);
		}
		free(v->u.obj.m);
		free(v->u.obj.sorted);
		break;
	case JSON_NULL:
	case JSON_BOOL:
	case JSON_INT:
	case JSON_DOUBLE:
		break;
	}
	free(v);
}

enum json_type json_type(const struct json_value *v)
{
	return v ? v->type : JSON_NULL;
}

static const char *const json_type_table[] = {
    [JSON_NULL] = "null",     [JSON_BOOL] = "boolean",	[JSON_INT] = "integer",
    [JSON_DOUBLE] = "number", [JSON_STRING] = "string", [JSON_ARRAY] = "array",
    [JSON_OBJECT] = "object",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(json_type, enum json_type);

const char *json_type_name(enum json_type t)
{
	return json_type_to_string(t) ?: "unknown";
}

const struct json_value *json_object_getn(const struct json_value *v, const char *key, size_t len)
{
	if (!v || v->type != JSON_OBJECT || !key)
		return NULL;
	struct json_member want = {.key = (char *)key, .key_len = len};
	size_t lo = 0, hi = v->u.obj.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct json_member *m = &v->u.obj.m[v->u.obj.sorted[mid]];
		int c = key_cmp(m, &want);
		if (c == 0)
			return m->value;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct json_value *json_object_get(const struct json_value *v, const char *key)
{
	return key ? json_object_getn(v, key, strlen(key)) : NULL;
}

size_t json_object_len(const struct json_value *v)
{
	return v && v->type == JSON_OBJECT ? v->u.obj.n : 0;
}

const struct json_value *json_object_member(const struct json_value *v, size_t i,
					    const char **ret_key, size_t *ret_key_len)
{
	if (!v || v->type != JSON_OBJECT || i >= v->u.obj.n)
		return NULL;
	if (ret_key)
		*ret_key = v->u.obj.m[i].key;
	if (ret_key_len)
		*ret_key_len = v->u.obj.m[i].key_len;
	return v->u.obj.m[i].value;
}

size_t json_array_len(const struct json_value *v)
{
	return v && v->type == JSON_ARRAY ? v->u.arr.n : 0;
}

const struct json_value *json_array_get(const struct json_value *v, size_t i)
{
	if (!v || v->type != JSON_ARRAY || i >= v->u.arr.n)
		return NULL;
	return v->u.arr.items[i];
}

const char *json_get_string(const struct json_value *v, size_t *ret_len)
{
	if (!v || v->type != JSON_STRING)
		return NULL;
	if (ret_len)
		*ret_len = v->u.str.len;
	return v->u.str.s;
}

int json_get_bool(const struct json_value *v, bool *ret)
{
	if (!v || v->type != JSON_BOOL)
		return -EINVAL;
	*ret = v->u.b;
	return 0;
}

int json_get_int64(const struct json_value *v, int64_t *ret)
{
	if (v && v->type == JSON_INT) {
		*ret = v->u.i;
		return 0;
	}
	if (!v || v->type != JSON_DOUBLE)
		return -EINVAL;
	double d = v->u.d;
	/* [-2^63, 2^63): both bounds are exact doubles; then the cast is defined */
	if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || (double)(int64_t)d != d)
		return -ERANGE;
	*ret = (int64_t)d;
	return 0;
}

int json_get_double(const struct json_value *v, double *ret)
{
	if (v && v->type == JSON_INT) {
		*ret = (double)v->u.i;
		return 0;
	}
	if (!v || v->type != JSON_DOUBLE)
		return -EINVAL;
	*ret = v->u.d;
	return 0;
}

bool json_is_null(const struct json_value *v)
{
	return v && v->type == JSON_NULL;
}
