/* SPDX-License-Identifier: MIT */
/*
 * The broker's socket door (DESIGN section 5; served by ipc.c): tokens and host operations for
 * cooperative clients. Each request goes through the same resolve, decide, before-change, perform
 * and audit code as an intercepted syscall (broker-ops.c), with a struct broker_door passed down
 * its calls: the audit phase and attribution, whether the broker performs what the kernel would
 * allow, the delete mode, and the outcome its answer names. Recursive copy and delete are built
 * here from single operations, each decided, backed up and logged on its own.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "basic/escape.h"
#include "basic/fd-util.h"
#include "basic/fs-util.h"
#include "basic/json-write.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/stat-util.h"
#include "basic/strbuf.h"
#include "basic/string-table.h"
#include "broker-internal.h"
#include "policy.h"
#include "trash.h"

static const char *const ipc_decision_table[] = {
    [BROKER_IPC_GRANT_TOKEN] = "grant-token",
    [BROKER_IPC_HOST_OP] = "host-op",
    [BROKER_IPC_SANDBOX] = "sandbox",
    [BROKER_IPC_DENY] = "deny",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(ipc_decision, enum broker_ipc_decision);

const char *broker_ipc_decision_name(enum broker_ipc_decision d)
{
	return ipc_decision_to_string(d);
}

void broker_ipc_result_done(struct broker_ipc_result *r)
{
	free(r->real);
	free(r->real_to);
	free(r->trashed);
	safe_close(r->fd);
	*r = (struct broker_ipc_result)BROKER_IPC_RESULT_INIT;
}

static int dup_or_null(const char *s, char **ret)
{
	free(*ret);
	*ret = NULL;
	if (s && !(*ret = strdup(s)))
		return -ENOMEM;
	return 0;
}

void broker_door_capture(struct broker_door *d, const struct op_log *l)
{
	d->logged = true;
	d->decision = l->decision;
	d->backup = l->backup;
	(void)dup_or_null(l->real, &d->real);
	(void)dup_or_null(l->real_to, &d->real_to);
}

/* The door's state for one request from peer; extra holds the audit attribution. */
static void door_begin(struct broker_door *d, struct broker *b, const struct broker_ipc_ctx *peer,
		       const char *phase, bool host, struct strbuf *extra)
{
	strbuf_appends(extra, "door=ipc");
	if (peer->tool_call && *peer->tool_call) {
		strbuf_appends(extra, " ipcToolCall=");
		escape_appends(extra, peer->tool_call);
	}
	if (peer->trace && *peer->trace) {
		strbuf_appends(extra, " trace=");
		escape_appends(extra, peer->trace);
	}
	*d = (struct broker_door){
	    .b = b,
	    .peer = peer,
	    .host = host,
	    .phase = phase,
	    .extra = extra->oom ? NULL : strbuf_cstr(extra),
	    .delete_mode = b->delete_mode,
	};
}

/* The answer: the paths and decision of what was logged last, unless the operation named its
 * own. */
static void door_end(struct broker_door *d, int r, bool token, struct broker_ipc_result *ret)
{
	ret->error = r < 0 ? r : 0;
	if (!ret->real)
		ret->real = TAKE_PTR(d->real);
	if (!ret->real_to)
		ret->real_to = TAKE_PTR(d->real_to);
	if (!ret->backup)
		ret->backup = d->backup;
	if (r >= 0)
		ret->decision = token ? (ret->fd >= 0 ? BROKER_IPC_GRANT_TOKEN : BROKER_IPC_SANDBOX)
				      : BROKER_IPC_HOST_OP;
	else if (d->logged && refused(d->decision) && (r == -EACCES || r == -EPERM))
		ret->decision = BROKER_IPC_DENY;
	else if (d->logged && d->decision != DECIDE_DENY)
		ret->decision = token ? BROKER_IPC_GRANT_TOKEN : BROKER_IPC_HOST_OP;
	else
		ret->decision = r == -EACCES ? BROKER_IPC_DENY : BROKER_IPC_NONE;
	free(d->real);
	free(d->real_to);
	d->real = d->real_to = NULL;
}

static struct broker_req door_req(const struct broker_door *d, enum broker_op op,
				  const char *syscall, const char *path)
{
	return (struct broker_req){
	    .op = op,
	    .tid = d->peer->pid > 0 ? d->peer->pid : getpid(),
	    .syscall_name = syscall,
	    .dirfd = AT_FDCWD,
	    .path = path,
	    .fd = -1,
	    .dirfd2 = AT_FDCWD,
	};
}

static struct resolve_ctx door_ctx(const struct broker_door *d)
{
	return (struct resolve_ctx){d->peer->pid > 0 ? d->peer->pid : getpid(), d->b->root_fd, NULL,
				    d->b->cfg.foreign_mounts};
}

/* One request through the common broker code; -errno, or 0 with an fd in *ret_fd for opens. */
static int door_handle(struct broker_door *d, const struct broker_req *q, int *ret_fd)
{
	struct broker_resp resp;
	broker_handle_call(d->b, d, q, &resp);
	int r;
	switch (resp.kind) {
	case BROKER_RESP_VALUE:
		r = resp.value < 0 ? (int)resp.value : 0;
		break;
	case BROKER_RESP_FD:
		r = 0;
		if (ret_fd)
			*ret_fd = TAKE_FD(resp.fd);
		break;
	case BROKER_RESP_CONTINUE:
		r = 0; /* the kernel would allow it: only token opens get here (SANDBOX) */
		break;
	case BROKER_RESP_DEFER:
		r = -EAGAIN; /* a FIFO without a reader: never block the broker for a socket client
			      */
		break;
	case BROKER_RESP_ERROR:
	default:
		r = resp.value < 0 ? (int)resp.value : -EIO;
		break;
	}
	broker_resp_done(&resp);
	return r;
}

/* A call the door decides and logs itself (reads, trash, ModifyBackup): refused unless decided. */
static void door_call_begin(struct broker_call *c, struct broker_door *d,
			    const struct broker_req *q, const char *phase)
{
	broker_call_begin(c, d->b, d, q, NULL, phase);
	c->log.decision = DECIDE_DENY;
}

static void door_call_end(struct broker_call *c, int r)
{
	broker_log_op(c, r < 0 ? r : 0);
	broker_call_end(c);
}

/* ---- tokens ---- */

/* Read token: the policy's read decision; the broker opens the file read-only (never blocking). */
static int door_read(struct broker_door *d, const char *path, int flags,
		     struct broker_ipc_result *ret)
{
	struct broker_req q = door_req(d, BROKER_OP_OPEN, "ipc-read", path);
	q.flags = (uint64_t)flags;
	struct broker_call c;
	door_call_begin(&c, d, &q, "ipc-token");
	struct resolved *res = &c.res;
	struct resolve_ctx ctx = door_ctx(d);
	int r =
	    resolve_path(&ctx, AT_FDCWD, path,
			 ((flags & O_NOFOLLOW) ? 0 : RESOLVE_FOLLOW) | RESOLVE_ALLOW_DOTDOT, res);
	if (r >= 0) {
		c.log.real = res->real;
		if (!res->exists)
			r = -ENOENT;
		else if (S_ISLNK(res->st.st_mode))
			r = -ELOOP;
	}
	if (r >= 0) {
		c.log.decision =
		    broker_decide(&c, res->real, POLICY_ACCESS_READ, &res->st, &c.log.reason);
		if (refused(c.log.decision)) {
			r = -EACCES;
		} else if (c.log.decision == DECIDE_BROKER) {
			int fd;
			int of = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
			if (res->obj_fd >= 0) {
				fd = open(FORMAT_PROC_FD_PATH(res->obj_fd), of);
			} else {
				fd = openat(res->parent_fd, res->name, of | O_NOFOLLOW);
			}
			if (fd < 0) {
				r = negative_errno();
			} else {
				if (!(flags & O_NONBLOCK))
					(void)fd_nonblock(fd, false);
				ret->fd = fd;
			}
		}
	}
	door_call_end(&c, r);
	return r;
}

void broker_ipc_token(struct broker *b, const struct broker_ipc_ctx *c, const char *path,
		      bool write, int flags, mode_t mode, struct broker_ipc_result *ret)
{
	*ret = (struct broker_ipc_result)BROKER_IPC_RESULT_INIT;
	if (!path || path[0] != '/') {
		ret->error = -EINVAL;
		return;
	}
	_cleanup_strbuf_ struct strbuf extra = STRBUF_INIT;
	struct broker_door d;
	door_begin(&d, b, c, "ipc-token", false, &extra);
	int r;
	if (!write) {
		r = door_read(&d, path, flags, ret);
	} else {
		struct broker_req q = door_req(&d, BROKER_OP_OPEN, "ipc-token", path);
		q.flags = (uint64_t)flags;
		q.mode = mode;
		r = door_handle(&d, &q, &ret->fd);
	}
	door_end(&d, r, true, ret);
}

/* ---- delete ---- */

static int door_trash(struct broker_door *d, const char *path, bool recursive,
		      struct broker_ipc_result *ret)
{
	struct broker_req q = door_req(d, BROKER_OP_UNLINK, "ipc-trash", path);
	struct broker_call c;
	door_call_begin(&c, d, &q, "ipc-host-op");
	struct resolved *res = &c.res;
	struct resolve_ctx ctx = door_ctx(d);
	int r = resolve_path(&ctx, AT_FDCWD, path, 0, res);
	if (r >= 0) {
		c.log.real = res->real;
		if (dot_or_dot_dot(res->name))
			r = -EINVAL;
		else if (!res->exists)
			r = -ENOENT;
		else if (S_ISDIR(res->st.st_mode) && !recursive &&
			 (r = dir_is_empty_at(res->parent_fd, res->name)) >= 0)
			r = r ? 0 : -ENOTEMPTY;
	}
	if (r >= 0) {
		c.log.decision =
		    broker_decide(&c, res->real, POLICY_ACCESS_DELETE, &res->st, &c.log.reason);
		if (refused(c.log.decision))
			r = -EACCES;
		else
			r = broker_trash_move(&c, res, &ret->trashed);
	}
	door_call_end(&c, r);
	return r;
}

/* Names in a directory (bounded), for the recursive forms. */
static int list_names_at(int parent_fd, const char *name, size_t *budget, char ***ret,
			 size_t *ret_n)
{
	DIR *dir = opendir_at(parent_fd, name);
	if (!dir)
		return negative_errno();
	char **v = NULL;
	size_t n = 0;
	int r = 0;
	struct dirent *de;
	while ((de = readdir(dir))) {
		if (dot_or_dot_dot(de->d_name))
			continue;
		if (*budget == 0) {
			r = -E2BIG;
			break;
		}
		(*budget)--;
		char **nv = realloc(v, (n + 1) * sizeof *nv);
		if (!nv || !(nv[n] = strdup(de->d_name))) {
			if (nv)
				v = nv;
			r = -ENOMEM;
			break;
		}
		v = nv;
		n++;
	}
	closedir(dir);
	if (r < 0) {
		for (size_t i = 0; i < n; i++)
			free(v[i]);
		free(v);
		return r;
	}
	*ret = v;
	*ret_n = n;
	return 0;
}

static void names_free(char **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* Remove one path (a file, or a directory emptied already) through the common unlink code. */
static int door_unlink(struct broker_door *d, const char *path, bool isdir)
{
	struct broker_req q = door_req(d, BROKER_OP_UNLINK, "ipc-delete", path);
	q.flags = isdir ? AT_REMOVEDIR : 0;
	return door_handle(d, &q, NULL);
}

/* Would the policy refuse deleting res? Decided as the common unlink code will decide it. */
static bool door_delete_refused(struct broker_door *d, const char *path, const struct resolved *res)
{
	struct broker_req q = door_req(d, BROKER_OP_UNLINK, "ipc-delete", path);
	struct broker_call c;
	broker_call_begin(&c, d->b, d, &q, NULL, "ipc-host-op");
	const char *reason = NULL;
	bool no = refused(broker_decide(&c, res->real, POLICY_ACCESS_DELETE, &res->st, &reason));
	broker_call_end(&c);
	return no;
}

/*
 * rm -r: a first pass only checks the policy on every path (so a refusal changes nothing), the
 * second removes depth first, each path through the common unlink code (backed up, logged).
 */
static int door_rm_tree(struct broker_door *d, const char *path, bool check, unsigned depth,
			size_t *budget)
{
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(d);
	int r = resolve_path(&ctx, AT_FDCWD, path, 0, &res);
	if (r < 0)
		return r;
	if (!res.exists) {
		resolved_done(&res);
		return 0; /* gone meanwhile */
	}
	bool isdir = S_ISDIR(res.st.st_mode);
	if (check && door_delete_refused(d, path, &res)) {
		resolved_done(&res);
		/* Let the common code refuse it, so that the refusal is logged as usual. */
		r = door_unlink(d, path, isdir);
		return r < 0 ? r : -EACCES;
	}
	_cleanup_free_ char *real = strdup(res.real);
	if (!real) {
		resolved_done(&res);
		return -ENOMEM;
	}
	char **names = NULL;
	size_t n = 0;
	if (isdir && (r = list_names_at(res.parent_fd, res.name, budget, &names, &n)) < 0) {
		resolved_done(&res);
		return r;
	}
	resolved_done(&res);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct strbuf child = STRBUF_INIT;
		r = path_join(real, names[i], &child);
		if (r >= 0)
			r = door_rm_tree(d, strbuf_cstr(&child), check, depth + 1, budget);
		strbuf_free(&child);
	}
	names_free(names, n);
	if (r >= 0 && !check)
		r = door_unlink(d, real, isdir);
	return r;
}

static int report_line(int fd, const char *target, const char *real, const char *mode,
		       const char *trashed)
{
	struct strbuf sb = STRBUF_INIT;
	strbuf_appendc(&sb, '{');
	json_kv_str(&sb, "target", target);
	if (real)
		json_kv_str(&sb, "normalisedPath", real);
	json_kv_str(&sb, "mode", mode);
	if (trashed)
		json_kv_str(&sb, "trashPath", trashed);
	strbuf_appends(&sb, "}\n");
	int r = sb.oom ? -ENOMEM : loop_write(fd, sb.buf, sb.len);
	strbuf_free(&sb);
	return r;
}

/* Open the safeDeleteReportPath (policy-checked, backed up) before anything is deleted. */
static int door_open_report(struct broker_door *d, const char *path, int *ret_fd)
{
	struct broker_req q = door_req(d, BROKER_OP_OPEN, "ipc-report", path);
	q.flags = O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK;
	q.mode = 0600;
	int r = door_handle(d, &q, ret_fd);
	if (r < 0)
		return r;
	return *ret_fd < 0 ? -EACCES : 0; /* SANDBOX cannot happen for a host op; be safe */
}

static int door_delete(struct broker_door *d, const struct broker_host_op *op,
		       struct broker_ipc_result *ret)
{
	/* The request's own mode, or the configured one; what its unlinks do too. */
	if (op->delete_mode != BROKER_DELETE_DEFAULT)
		d->delete_mode = op->delete_mode;
	bool trash = d->delete_mode == BROKER_DELETE_TRASH;
	_cleanup_close_ int report_fd = -1;
	int r;
	if (op->report_path && (r = door_open_report(d, op->report_path, &report_fd)) < 0)
		return r;
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(d);
	r = resolve_path(&ctx, AT_FDCWD, op->path, 0, &res);
	if (r < 0)
		return r;
	(void)dup_or_null(res.real, &ret->real);
	bool exists = res.exists, isdir = res.exists && S_ISDIR(res.st.st_mode);
	resolved_done(&res);
	if (!exists)
		return op->force ? 0 : -ENOENT;

	if (trash) {
		r = door_trash(d, op->path, op->recursive, ret);
	} else if (isdir && op->recursive) {
		size_t budget = BROKER_TREE_MAX_ENTRIES;
		r = door_rm_tree(d, op->path, true, 0, &budget);
		budget = BROKER_TREE_MAX_ENTRIES;
		if (r >= 0)
			r = door_rm_tree(d, op->path, false, 0, &budget);
	} else {
		r = door_unlink(d, op->path, isdir);
	}
	if (r == -ENOENT && op->force)
		r = 0;
	if (r >= 0 && report_fd >= 0)
		(void)report_line(report_fd, op->path, ret->real, trash ? "trash" : "unlink",
				  ret->trashed);
	return r;
}

/* ---- mkdir ---- */

static int door_mkdir(struct broker_door *d, const struct broker_host_op *op,
		      struct broker_ipc_result *ret)
{
	mode_t mode = op->has_mode ? op->mode : 0777;
	if (!op->recursive) {
		struct broker_req q = door_req(d, BROKER_OP_MKDIR, "ipc-mkdir", op->path);
		q.mode = mode;
		return door_handle(d, &q, NULL);
	}
	_cleanup_strbuf_ struct strbuf norm = STRBUF_INIT;
	int r = path_normalise(op->path, &norm);
	if (r < 0)
		return r;
	char *p = norm.buf;
	struct resolve_ctx ctx = door_ctx(d);
	for (size_t i = 1; r >= 0 && i <= norm.len; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		bool last = p[i] == '\0';
		char saved = p[i];
		p[i] = '\0';
		struct resolved res = RESOLVED_INIT;
		r = resolve_path(&ctx, AT_FDCWD, p, RESOLVE_FOLLOW, &res);
		if (r >= 0 && res.exists) {
			if (!S_ISDIR(res.st.st_mode))
				r = last ? -EEXIST : -ENOTDIR;
			if (last)
				(void)dup_or_null(res.real, &ret->real);
		} else if (r >= 0) {
			struct broker_req q = door_req(d, BROKER_OP_MKDIR, "ipc-mkdir", p);
			q.mode = last ? mode : 0777;
			r = door_handle(d, &q, NULL);
			if (r == -EEXIST)
				r = 0; /* made meanwhile */
		}
		resolved_done(&res);
		p[i] = saved;
	}
	return r;
}

/* ---- copy ---- */

/*
 * The read side of a copy: resolve from into c->res, decide it with the policy's read decision,
 * open a regular file into *ret_src. Only refusals and failures here get a line of their own.
 */
static int copy_source(struct broker_call *c, const char *from, bool top, bool recursive,
		       int *ret_src)
{
	struct resolved *res = &c->res;
	struct resolve_ctx ctx = broker_call_resolve_ctx(c);
	int r = resolve_path(&ctx, AT_FDCWD, from, top ? RESOLVE_FOLLOW : 0, res);
	if (r >= 0) {
		c->log.real = res->real;
		if (!res->exists)
			r = -ENOENT;
		else if (res->obj_fd >= 0)
			r = -EINVAL; /* magic links: not copied */
	}
	if (r >= 0) {
		c->log.decision =
		    broker_decide(c, res->real, POLICY_ACCESS_READ, &res->st, &c->log.reason);
		if (refused(c->log.decision))
			r = -EACCES;
		else
			c->log.decision = DECIDE_BROKER;
	}
	mode_t mode = res->st.st_mode;
	if (r >= 0 && S_ISREG(mode)) {
		*ret_src = openat(res->parent_fd, res->name,
				  O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;
		if (*ret_src < 0)
			r = negative_errno();
		else if (fstat(*ret_src, &st) < 0 || !stat_inode_same(&st, &res->st))
			r = -EAGAIN;
	} else if (r >= 0 && S_ISDIR(mode) && !recursive) {
		r = -EISDIR;
	} else if (r >= 0 && !S_ISDIR(mode) && !S_ISLNK(mode)) {
		r = -EOPNOTSUPP; /* FIFOs, devices, sockets are not copied */
	}
	if (r < 0)
		broker_log_op(c, r);
	return r;
}

static int copy_file(struct broker_door *d, int src, const char *to, mode_t mode)
{
	struct broker_req q = door_req(d, BROKER_OP_OPEN, "ipc-copy", to);
	q.flags = O_WRONLY | O_CREAT | O_TRUNC | O_NONBLOCK;
	q.mode = mode & 07777;
	_cleanup_close_ int dst = -1;
	int r = door_handle(d, &q, &dst);
	if (r >= 0 && dst < 0)
		r = -EACCES;
	if (r >= 0)
		r = copy_bytes(src, dst);
	return r;
}

static int copy_symlink(struct broker_door *d, const struct resolved *res, const char *to)
{
	char target[BROKERED_PATH_MAX + 1];
	ssize_t k = readlinkat(res->parent_fd, res->name, target, sizeof target);
	if (k < 0)
		return negative_errno();
	if ((size_t)k >= sizeof target)
		return -ENAMETOOLONG;
	target[k] = '\0';
	struct broker_req q = door_req(d, BROKER_OP_SYMLINK, "ipc-copy", NULL);
	q.path2 = to;
	q.symlink_target = target;
	return door_handle(d, &q, NULL);
}

static int door_copy(struct broker_door *d, const char *from, const char *to, bool recursive,
		     unsigned depth, size_t *budget);

/* A directory (resolved in res, freed here): refuse copying it into itself, mkdir, recurse. */
static int copy_dir(struct broker_door *d, struct resolved *res, const char *to, unsigned depth,
		    size_t *budget)
{
	mode_t mode = res->st.st_mode;
	_cleanup_free_ char *real = strdup(res->real);
	char **names = NULL;
	size_t n = 0;
	int r = real ? list_names_at(res->parent_fd, res->name, budget, &names, &n) : -ENOMEM;
	resolved_done(res);
	if (r < 0)
		return r;
	struct resolved dst = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(d);
	r = resolve_path(&ctx, AT_FDCWD, to, 0, &dst);
	if (r >= 0 && dst.real && path_is_under(dst.real, real))
		r = -EINVAL;
	bool exists = r >= 0 && dst.exists && S_ISDIR(dst.st.st_mode);
	if (r >= 0 && dst.exists && !exists)
		r = -ENOTDIR;
	resolved_done(&dst);
	if (r >= 0 && !exists) {
		struct broker_req q = door_req(d, BROKER_OP_MKDIR, "ipc-copy", to);
		q.mode = (mode & 07777) | 0700;
		r = door_handle(d, &q, NULL);
	}
	for (size_t i = 0; r >= 0 && i < n; i++) {
		struct strbuf sf = STRBUF_INIT, st = STRBUF_INIT;
		r = path_join(real, names[i], &sf);
		if (r >= 0)
			r = path_join(to, names[i], &st);
		if (r >= 0)
			r = door_copy(d, strbuf_cstr(&sf), strbuf_cstr(&st), true, depth + 1,
				      budget);
		strbuf_free(&sf);
		strbuf_free(&st);
	}
	names_free(names, n);
	return r;
}

/*
 * copy: the source is read with the policy's read decision, the destination is written through
 * the common open/mkdir/symlink code (policy, backup, audit). A directory needs recursive; inside
 * a tree symlinks are copied as symlinks (cp -r), the top-level source is followed.
 */
static int door_copy(struct broker_door *d, const char *from, const char *to, bool recursive,
		     unsigned depth, size_t *budget)
{
	if (depth > BROKER_TREE_MAX_DEPTH)
		return -ELOOP;
	if (*budget == 0)
		return -E2BIG;
	(*budget)--;
	struct broker_req rq = door_req(d, BROKER_OP_OPEN, "ipc-copy-read", from);
	struct broker_call c;
	door_call_begin(&c, d, &rq, "ipc-host-op");
	_cleanup_close_ int src = -1;
	int r = copy_source(&c, from, depth == 0, recursive, &src);
	if (r >= 0) {
		mode_t mode = c.res.st.st_mode;
		if (S_ISREG(mode))
			r = copy_file(d, src, to, mode);
		else if (S_ISLNK(mode))
			r = copy_symlink(d, &c.res, to);
		else
			r = copy_dir(d, &c.res, to, depth, budget);
	}
	broker_call_end(&c);
	return r;
}

/* ---- touch, ModifyBackup ---- */

static int door_touch(struct broker_door *d, const char *path)
{
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(d);
	int r = resolve_path(&ctx, AT_FDCWD, path, RESOLVE_FOLLOW, &res);
	bool exists = r >= 0 && res.exists;
	resolved_done(&res);
	if (r < 0)
		return r;
	if (exists) {
		struct broker_req q = door_req(d, BROKER_OP_UTIMES, "ipc-touch", path);
		q.times_now = true;
		return door_handle(d, &q, NULL);
	}
	struct broker_req q = door_req(d, BROKER_OP_OPEN, "ipc-touch", path);
	q.flags = O_WRONLY | O_CREAT | O_NONBLOCK;
	q.mode = 0666;
	_cleanup_close_ int fd = -1;
	return door_handle(d, &q, &fd);
}

/* ModifyBackup: the client is about to write path itself; record its pre-image (or absence). */
static int door_modify_backup(struct broker_door *d, const char *path)
{
	struct broker_req q = door_req(d, BROKER_OP_OPEN, "ipc-modify-backup", path);
	struct broker_call c;
	door_call_begin(&c, d, &q, "host-modify-backup");
	struct resolved *res = &c.res;
	struct resolve_ctx ctx = door_ctx(d);
	int r = resolve_path(&ctx, AT_FDCWD, path, RESOLVE_FOLLOW | RESOLVE_ALLOW_DOTDOT, res);
	if (r >= 0) {
		c.log.real = res->real;
		if (res->obj_fd >= 0 || !res->name)
			r = -EINVAL;
		else if (res->exists && S_ISDIR(res->st.st_mode))
			r = -EISDIR;
	}
	if (r >= 0) {
		c.log.decision = broker_decide(&c, res->real, POLICY_ACCESS_WRITE,
					       res->exists ? &res->st : NULL, &c.log.reason);
		if (refused(c.log.decision))
			r = -EACCES;
		else if (res->exists && !S_ISREG(res->st.st_mode))
			c.log.backup = "not-regular";
		else
			r = broker_before_change_res(&c, res, 0);
	}
	door_call_end(&c, r);
	return r;
}

/* ---- host operations ---- */

/* The real path of path into *ret (left alone if it cannot be resolved). */
static void door_real(struct broker_door *d, const char *path, unsigned flags, char **ret)
{
	struct resolved res = RESOLVED_INIT;
	struct resolve_ctx ctx = door_ctx(d);
	if (resolve_path(&ctx, AT_FDCWD, path, flags, &res) >= 0)
		(void)dup_or_null(res.real, ret);
	resolved_done(&res);
}

static int door_link(struct broker_door *d, const struct broker_host_op *op,
		     struct broker_ipc_result *ret)
{
	struct broker_req q;
	int r;
	if (op->symbolic) {
		q = door_req(d, BROKER_OP_SYMLINK, "ipc-symlink", NULL);
		q.path2 = op->to;
		q.symlink_target = op->path;
		r = door_handle(d, &q, NULL);
		/* The link itself is the "to" side of the answer. */
		ret->real_to = TAKE_PTR(d->real);
		return r;
	}
	q = door_req(d, BROKER_OP_LINK, "ipc-link", op->path);
	q.path2 = op->to;
	r = door_handle(d, &q, NULL);
	/* The audit line names the new link; the answer names both sides. */
	ret->real_to = TAKE_PTR(d->real);
	door_real(d, op->path, 0, &ret->real);
	return r;
}

static int door_host_op(struct broker_door *d, const struct broker_host_op *op,
			struct broker_ipc_result *ret)
{
	struct broker_req q;
	size_t budget = BROKER_TREE_MAX_ENTRIES;
	int r;
	switch (op->kind) {
	case BROKER_HOST_DELETE:
		return door_delete(d, op, ret);
	case BROKER_HOST_MKDIR:
		return door_mkdir(d, op, ret);
	case BROKER_HOST_RENAME:
		q = door_req(d, BROKER_OP_RENAME, "ipc-rename", op->path);
		q.path2 = op->to;
		return door_handle(d, &q, NULL);
	case BROKER_HOST_COPY:
		r = door_copy(d, op->path, op->to, op->recursive, 0, &budget);
		if (r >= 0) {
			/* The answer names the top-level paths, not the last file copied. */
			door_real(d, op->path, RESOLVE_FOLLOW, &ret->real);
			door_real(d, op->to, 0, &ret->real_to);
		}
		return r;
	case BROKER_HOST_CHMOD:
		if (!op->has_mode)
			return -EINVAL;
		q = door_req(d, BROKER_OP_CHMOD, "ipc-chmod", op->path);
		q.mode = op->mode;
		return door_handle(d, &q, NULL);
	case BROKER_HOST_LINK:
		return door_link(d, op, ret);
	case BROKER_HOST_TOUCH:
		return door_touch(d, op->path);
	case BROKER_HOST_MODIFY_BACKUP:
		return door_modify_backup(d, op->path);
	default:
		return -EOPNOTSUPP;
	}
}

void broker_ipc_host_op(struct broker *b, const struct broker_ipc_ctx *c,
			const struct broker_host_op *op, struct broker_ipc_result *ret)
{
	*ret = (struct broker_ipc_result)BROKER_IPC_RESULT_INIT;
	bool two = op->kind == BROKER_HOST_RENAME || op->kind == BROKER_HOST_COPY ||
		   op->kind == BROKER_HOST_LINK;
	bool sym = op->kind == BROKER_HOST_LINK && op->symbolic;
	if (!op->path || !*op->path || (!sym && op->path[0] != '/') ||
	    (two && (!op->to || op->to[0] != '/')) ||
	    (op->report_path && op->report_path[0] != '/')) {
		ret->error = -EINVAL;
		return;
	}
	_cleanup_strbuf_ struct strbuf extra = STRBUF_INIT;
	struct broker_door d;
	door_begin(&d, b, c,
		   op->kind == BROKER_HOST_MODIFY_BACKUP ? "host-modify-backup" : "ipc-host-op",
		   true, &extra);
	int r = door_host_op(&d, op, ret);
	door_end(&d, r, false, ret);
}
