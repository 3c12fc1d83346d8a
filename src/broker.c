/* SPDX-License-Identifier: MIT */
/*
 * The broker's core: the object, decide, the audit line, prompts, the pre-modification hook and
 * the dispatch of one request (the operations: broker-ops.c; the socket door: broker-door.c).
 */
#include "broker.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "audit.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/string-table.h"
#include "broker-internal.h"
#include "policy.h"
#include "proc.h"
#include "resolve.h"
#include "sandbox.h"
#include "store.h"

static const char *const op_names[_BROKER_OP_MAX] = {
    [BROKER_OP_OPEN] = "open",
    [BROKER_OP_TRUNCATE] = "truncate",
    [BROKER_OP_UNLINK] = "unlink",
    [BROKER_OP_RENAME] = "rename",
    [BROKER_OP_MKDIR] = "mkdir",
    [BROKER_OP_MKNOD] = "mknod",
    [BROKER_OP_LINK] = "link",
    [BROKER_OP_SYMLINK] = "symlink",
    [BROKER_OP_CHMOD] = "chmod",
    [BROKER_OP_CHOWN] = "chown",
    [BROKER_OP_UTIMES] = "utimes",
    [BROKER_OP_SETXATTR] = "setxattr",
    [BROKER_OP_REMOVEXATTR] = "removexattr",
    [BROKER_OP_CONNECT] = "connect",
    [BROKER_OP_BIND] = "bind",
    [BROKER_OP_SENDTO] = "sendto",
    [BROKER_OP_SENDMSG] = "sendmsg",
};

const char *broker_op_name(enum broker_op op)
{
	return op < _BROKER_OP_MAX && op_names[op] ? op_names[op] : "unknown";
}

int broker_new(const struct broker_config *cfg, struct audit *audit, struct store_turn *turn,
	       struct broker **ret)
{
	struct broker *b = calloc(1, sizeof *b);
	if (!b)
		return -ENOMEM;
	b->cfg = *cfg;
	b->audit = audit;
	b->turn = turn;
	b->delete_mode = BROKER_DELETE_UNLINK;
	for (size_t i = 0; i < BROKER_CREATED_MAX; i++)
		b->created[i].fd = -1;
	b->pid = getpid();
	b->root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (b->root_fd < 0) {
		int r = negative_errno();
		free(b);
		return r;
	}
	*ret = b;
	return 0;
}

void broker_free(struct broker *b)
{
	if (!b)
		return;
	broker_created_forget(b);
	safe_close(b->root_fd);
	for (size_t i = 0; i < b->n_oversize; i++)
		free(b->oversize[i]);
	free(b->oversize);
	for (size_t i = 0; i < b->n_prompts; i++) {
		free(b->prompts[i].path);
		free(b->prompts[i].op);
		free(b->prompts[i].rule);
	}
	free(b->prompts);
	free(b->shm_own);
	free(b);
}

void broker_set_policy(struct broker *b, const struct policy *p)
{
	b->policy = p;
}

const struct broker_stats *broker_get_stats(const struct broker *b)
{
	return &b->stats;
}

char **broker_not_backed_up(const struct broker *b)
{
	return b->oversize;
}

const struct broker_prompt *broker_prompts(const struct broker *b, size_t *ret_n)
{
	*ret_n = b->n_prompts;
	return b->prompts;
}

#define MAX_PROMPTS 256

static void record_prompt(struct broker *b, const char *real, unsigned access, const char *op,
			  const char *rule)
{
	for (size_t i = 0; i < b->n_prompts; i++)
		if (strcmp(b->prompts[i].path, real) == 0) {
			b->prompts[i].access |= access;
			return;
		}
	if (b->n_prompts >= MAX_PROMPTS)
		return;
	struct broker_prompt *n = realloc(b->prompts, (b->n_prompts + 1) * sizeof *n);
	if (!n)
		return;
	b->prompts = n;
	struct broker_prompt *p = &n[b->n_prompts];
	p->path = strdup(real);
	p->op = strdup(op ? op : "-");
	p->rule = strdup(rule ? rule : "-");
	p->access = access;
	if (!p->path || !p->op || !p->rule) {
		free(p->path);
		free(p->op);
		free(p->rule);
		return;
	}
	b->n_prompts++;
}

void broker_add_prompt(struct broker *b, const char *path, unsigned access, const char *op,
		       const char *rule)
{
	record_prompt(b, path, access, op, rule);
}

void broker_resp_done(struct broker_resp *resp)
{
	resp->fd = safe_close(resp->fd);
	resp->defer_unix_fd = safe_close(resp->defer_unix_fd);
	resp->created_parent_fd = safe_close(resp->created_parent_fd);
	free(resp->created_name);
	resp->created_name = NULL;
}

void broker_undo_creation(struct broker *b, struct broker_resp *resp)
{
	if (resp->created_parent_fd >= 0 && resp->created_name)
		(void)unlinkat(resp->created_parent_fd, resp->created_name, 0);
}

/* ---- decisions ---- */

static const char *decision_name(enum decision d)
{
	switch (d) {
	case DECIDE_BROKER:
		return "allow";
	case DECIDE_KERNEL:
		return "sandbox";
	case DECIDE_PROMPT:
		return "prompt";
	case DECIDE_UNSET:
		return "none";
	case DECIDE_DENY:
	default:
		return "deny";
	}
}

/* Device nodes Landlock lets the target write by itself (the list sandbox.c grants). */
static bool is_kernel_writable_device(const char *real, const struct stat *st)
{
	if (!real)
		return false;
	for (size_t i = 0; i < sandbox_n_writable_devices; i++) {
		const char *d = sandbox_writable_devices[i];
		if (strcmp(d, "/dev/pts") == 0 ? path_is_under(real, d) : false)
			return true;
		if (strcmp(real, d) == 0)
			return !st || S_ISCHR(st->st_mode);
	}
	return false;
}

enum decision broker_decide(struct broker_call *c, const char *real, unsigned access,
			    const struct stat *st, const char **ret_reason)
{
	struct broker *b = c->b;
	*ret_reason = NULL;
	if (!real)
		return DECIDE_DENY;
	/* Without Landlock nothing but the broker enforces: it performs everything itself (a
	 * CONTINUE would let a racing thread swap the path after the check). */
	enum decision kernel =
	    b->cfg.kernel_enforces && !(c->door && c->door->host) ? DECIDE_KERNEL : DECIDE_BROKER;
	if (path_is_under(real, b->cfg.scratch)) {
		*ret_reason = "scratch";
		return kernel;
	}
	if (broker_is_shm(b, real)) {
		enum decision d = broker_shm_decide(b, real, access, ret_reason);
		if (d == DECIDE_BROKER && (access & POLICY_ACCESS_DELETE))
			broker_shm_forget(b, real);
		if (d != DECIDE_UNSET)
			return d;
	}
	if (access == POLICY_ACCESS_WRITE && is_kernel_writable_device(real, st)) {
		*ret_reason = "device";
		return kernel;
	}
	const char *reason = NULL;
	enum policy_decision d = policy_check(b->policy, real, access, &reason);
	*ret_reason = reason;
	if (d == POLICY_ALLOW)
		return DECIDE_BROKER;
	if (d == POLICY_PROMPT) {
		/* Refused now; the orchestrator asks once after the command and may rerun. */
		record_prompt(b, real, access, broker_op_name(c->q->op), reason);
		return DECIDE_PROMPT;
	}
	return DECIDE_DENY;
}

/* ---- audit ---- */

static const char *errno_name(int e)
{
	switch (e) {
	case 0:
		return "ok";
	case EACCES:
		return "EACCES";
	case EPERM:
		return "EPERM";
	case ENOENT:
		return "ENOENT";
	case EEXIST:
		return "EEXIST";
	case ENOTDIR:
		return "ENOTDIR";
	case EISDIR:
		return "EISDIR";
	case ENOTEMPTY:
		return "ENOTEMPTY";
	case ELOOP:
		return "ELOOP";
	case ENAMETOOLONG:
		return "ENAMETOOLONG";
	case ENOSPC:
		return "ENOSPC";
	case EIO:
		return "EIO";
	case EXDEV:
		return "EXDEV";
	case EINVAL:
		return "EINVAL";
	case EBADF:
		return "EBADF";
	case EFBIG:
		return "EFBIG";
	case ENXIO:
		return "ENXIO";
	case EROFS:
		return "EROFS";
	case EBUSY:
		return "EBUSY";
	case EOPNOTSUPP:
		return "EOPNOTSUPP";
	case EFAULT:
		return "EFAULT";
	default:
		return NULL;
	}
}

/* Append key and value to buf (size cap, *at bytes used, NUL-terminated), cut at the end as
 * snprintf() would: the audit line's extra fields, on every brokered call. */
static void extra_put(char *buf, size_t cap, size_t *at, const char *key, const char *value)
{
	const char *parts[] = {key, value};
	for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
		size_t k = strnlen(parts[i], cap - 1 - *at);
		memcpy(buf + *at, parts[i], k);
		*at += k;
	}
	buf[*at] = '\0';
}

void broker_log_op(struct broker_call *c, int result)
{
	struct broker *b = c->b;
	const struct broker_req *q = c->q;
	const struct op_log *l = &c->log;
	const struct timespec *t0 = &c->t0;
	/* Failed before the policy was asked (EEXIST, ENOENT, ...): say what it would have
	 * decided, without recording prompts. */
	struct op_log fixed;
	if (l->decision == DECIDE_UNSET && l->real) {
		fixed = *l;
		unsigned acc = q->op == BROKER_OP_UNLINK ? POLICY_ACCESS_DELETE
			       : (q->op >= BROKER_OP_CHMOD && q->op <= BROKER_OP_REMOVEXATTR)
				   ? POLICY_ACCESS_METADATA
				   : POLICY_ACCESS_WRITE;
		if (path_is_under(l->real, b->cfg.scratch))
			fixed.decision = DECIDE_KERNEL;
		else
			fixed.decision =
			    policy_check(b->policy, l->real, acc, &fixed.reason) == POLICY_ALLOW
				? DECIDE_BROKER
				: DECIDE_DENY;
		l = &fixed;
	}
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uint64_t us =
	    (uint64_t)((t1.tv_sec - t0->tv_sec) * 1000000 + (t1.tv_nsec - t0->tv_nsec) / 1000);
	char res[32];
	const char *rn = errno_name(-MIN(result, 0));
	if (!rn) {
		snprintf(res, sizeof res, "errno%d", -result);
		rn = res;
	}
	char extra[1024];
	size_t n = 0;
	extra_put(extra, sizeof extra, &n, "syscall=", q->syscall_name ? q->syscall_name : "-");
	if (l->reason)
		extra_put(extra, sizeof extra, &n, " rule=", l->reason);
	if (l->backup)
		extra_put(extra, sizeof extra, &n, " backup=", l->backup);
	if (c->door && c->door->extra)
		extra_put(extra, sizeof extra, &n, " ", c->door->extra);
	if (c->door)
		broker_door_capture(c->door, l);
	struct audit_record rec = {
	    .phase = c->door && c->door->phase ? c->door->phase : l->phase,
	    .op = broker_op_name(q->op),
	    .path = l->path,
	    .normalised = l->real,
	    .to = l->to,
	    .normalised_to = l->real_to,
	    .decision = decision_name(l->decision),
	    .result = rn,
	    .extra = extra,
	    .pid = q->tid,
	    .us = us,
	};
	audit_log(b->audit, &rec);
}

int broker_check_git_guard(struct broker_call *c, const char *real, enum git_guard_make how)
{
	if (!real || path_is_under(real, c->b->cfg.scratch) || git_guard_name_allowed(real, how))
		return 0;
	c->log.decision = DECIDE_DENY;
	c->log.reason = "protected:git";
	return -EACCES;
}

/* ---- the pre-modification hook ---- */

static const char *const store_result_table[] = {
    [STORE_RESULT_ALREADY] = "already",	  [STORE_RESULT_ABSENT] = "absent",
    [STORE_RESULT_SAVED] = "saved",	  [STORE_RESULT_NOT_BACKED_UP] = "not-backed-up",
    [STORE_RESULT_DISABLED] = "disabled",
};
DEFINE_PRIVATE_STRING_TABLE_LOOKUP_TO_STRING(store_result, enum store_result);

static void remember_oversize(struct broker *b, const char *path)
{
	if (b->n_oversize >= 1000) /* the summary names the first thousand */
		return;
	char **n = realloc(b->oversize, (b->n_oversize + 2) * sizeof *n);
	if (!n)
		return;
	b->oversize = n;
	n[b->n_oversize] = strdup(path);
	if (n[b->n_oversize])
		b->n_oversize++;
	n[b->n_oversize] = NULL;
}

/*
 * A file on tmpfs or ramfs does not survive a crash, so neither needs its pre-image: it is
 * recorded without waiting for a flush (the record still precedes the change in memory). dev is the
 * parent's st_dev when the caller has it (0: look).
 */
static bool is_volatile(struct broker *b, int parent_fd, dev_t dev)
{
	if (!dev) {
		struct stat st;
		if (fstat(parent_fd, &st) < 0)
			return false;
		dev = st.st_dev;
	}
	if (b->volatile_known && dev == b->volatile_dev)
		return b->volatile_known > 0;
	struct statfs sf;
	bool v = fstatfs(parent_fd, &sf) == 0 &&
		 (sf.f_type == 0x01021994 /* TMPFS_MAGIC */ || sf.f_type == 0x858458f6 /* RAMFS */);
	b->volatile_dev = dev;
	b->volatile_known = v ? 1 : -1;
	return v;
}

/*
 * broker_before_change() (broker-internal.h): st is the name's lstat() just taken by the caller,
 * or NULL with STORE_ABSENT in flags, or NULL (the store looks); dev the parent's st_dev, or 0.
 * The name is consumed by the store only with STORE_MOVE (1: the file is in the store now, its
 * record needs no flush); a removal is the caller's, after the record.
 */
static int before_change(struct broker_call *c, int parent_fd, const char *name, const char *real,
			 const struct stat *st, dev_t dev, unsigned flags)
{
	struct broker *b = c->b;
	struct op_log *l = &c->log;
	l->absent = false;
	if (!b->turn || !b->cfg.backup_enabled) {
		l->backup = "disabled";
		return 0;
	}
	if (broker_is_shm(b, real)) { /* shared memory: nothing to give back (broker-shm.c) */
		l->backup = "none";
		return 0;
	}
	enum store_result res = STORE_RESULT_DISABLED;
	bool consumed = false;
	if ((flags & STORE_MOVE) && is_volatile(b, parent_fd, dev))
		flags |= STORE_VOLATILE;
	int r = store_preimage_stat(b->turn, parent_fd, name, real, st, flags, &res, &consumed);
	if (r < 0) {
		l->backup = "failed";
		/* An oversize file under deny_oversize is a refusal, not an I/O error. */
		return r == -EFBIG ? -EACCES : r;
	}
	l->backup = store_result_to_string(res);
	switch (res) {
	case STORE_RESULT_SAVED:
		b->stats.backups_saved++;
		if (consumed)
			return 1;
		if (b->batch && !is_volatile(b, parent_fd, dev)) {
			b->batch_dirty = true;
			return -EINPROGRESS; /* recorded; flushed with the batch, then done again */
		}
		if (is_volatile(b, parent_fd, dev)) {
			r = store_flush(b->turn);
		} else {
			r = store_sync(b->turn);
			b->flushed = true;
		}
		if (r < 0) {
			l->backup = "sync-failed";
			return r;
		}
		break;
	case STORE_RESULT_ABSENT:
		b->stats.backups_absent++;
		l->absent = true;
		break;
	case STORE_RESULT_NOT_BACKED_UP:
		b->stats.not_backed_up++;
		remember_oversize(b, real);
		break;
	case STORE_RESULT_ALREADY:
		/* maybe recorded by an earlier request of this batch: not durable before its flush
		 */
		if (b->batch && b->batch_dirty)
			return -EINPROGRESS;
		break;
	case STORE_RESULT_DISABLED:
	default:
		break;
	}
	return 0;
}

int broker_before_change(struct broker_call *c, int parent_fd, const char *name, const char *real,
			 unsigned flags)
{
	return before_change(c, parent_fd, name, real, NULL, 0, flags);
}

int broker_before_change_st(struct broker_call *c, int parent_fd, const char *name,
			    const char *real, const struct stat *st, unsigned flags)
{
	/* the name's device is its parent's (a mount point is never merged) */
	return before_change(c, parent_fd, name, real, st, st ? st->st_dev : 0,
			     st ? flags : flags | STORE_ABSENT);
}

int broker_keep_tree(struct broker *b, int parent_fd, const char *name, const char *real,
		     const struct stat *st, struct store_tree_opts *o, struct store_record **ret,
		     size_t *ret_n)
{
	*ret = NULL;
	*ret_n = 0;
	if (!b->turn || !b->cfg.backup_enabled)
		return 0;
	o->durable = !is_volatile(b, parent_fd, st->st_dev);
	struct store_stats before, after;
	store_turn_stats(b->turn, &before);
	int r = store_keep_tree(b->turn, parent_fd, name, real, st, o, ret, ret_n);
	if (r > 0) {
		/* the paths the turn had not recorded yet */
		store_turn_stats(b->turn, &after);
		b->stats.backups_saved += after.saved - before.saved;
		b->flushed |= o->durable;
	}
	return r;
}

int broker_unkeep_file(struct broker *b, int parent_fd, const char *name)
{
	return store_unkeep_file(b->turn, parent_fd, name);
}

int broker_before_change_res(struct broker_call *c, const struct resolved *res, unsigned flags)
{
	return before_change(c, res->parent_fd, res->name, res->real, res->exists ? &res->st : NULL,
			     res->parent_dev, res->exists ? flags : flags | STORE_ABSENT);
}

/* ---- creations ---- */

static int target_umask(const struct broker_req *q, mode_t *ret)
{
	int r = proc_get_umask(q->tid, q->notif, ret);
	if (r < 0)
		*ret = 022;
	return r;
}

mode_t broker_setid_strip(const struct broker *b, mode_t mode, bool dir)
{
	return b->cfg.allow_setid || dir ? mode : mode & ~SETID_BITS;
}

mode_t broker_create_mode(const struct broker_call *c, bool dir)
{
	mode_t um;
	target_umask(c->q, &um);
	return broker_setid_strip(c->b, c->q->mode & ~um & 07777, dir);
}

/* ---- dispatch ---- */

void broker_call_begin(struct broker_call *c, struct broker *b, struct broker_door *door,
		       const struct broker_req *q, struct broker_resp *resp, const char *phase)
{
	*c = (struct broker_call){
	    .b = b,
	    .door = door,
	    .q = q,
	    .resp = resp,
	    .res = RESOLVED_INIT,
	    .res2 = RESOLVED_INIT,
	    .log = {.phase = phase,
		    .path = q->op == BROKER_OP_SYMLINK || !q->path ? q->path2 : q->path,
		    .decision = DECIDE_UNSET},
	};
	clock_gettime(CLOCK_MONOTONIC, &c->t0);
}

void broker_call_end(struct broker_call *c)
{
	if (c->res_open)
		c->res.obj_fd = -1; /* borrowed from b->created */
	resolved_done(&c->res);
	resolved_done(&c->res2);
}

/* faccessat2(dirfd, name, mode, flags | AT_EACCESS) with this thread's file-system ids and
 * groups those of id (only this thread's: the raw syscalls, not glibc's for all threads); id NULL:
 * with ours. */
static int faccess_as(const struct proc_ids *id, uid_t uid, gid_t gid, int dirfd, const char *name,
		      int mode, int flags)
{
	flags |= AT_EACCESS;
	gid_t own[PROC_GROUPS_MAX];
	int n_own = getgroups(PROC_GROUPS_MAX, own);
	bool same = !id || (uid == geteuid() && gid == getegid() && n_own == (int)id->n_groups &&
			    memcmp(own, id->groups, id->n_groups * sizeof(gid_t)) == 0);
	if (same || n_own < 0)
		return syscall(SYS_faccessat2, dirfd, name, mode, flags) < 0 ? negative_errno() : 0;
	int r = -EACCES;
	if (syscall(SYS_setgroups, id->n_groups, id->groups) == 0) {
		(void)syscall(SYS_setfsgid, gid);
		(void)syscall(SYS_setfsuid, uid);
		if ((uid_t)syscall(SYS_setfsuid, -1) == uid &&
		    (gid_t)syscall(SYS_setfsgid, -1) == gid)
			r = syscall(SYS_faccessat2, dirfd, name, mode, flags) < 0 ? negative_errno()
										  : 0;
		(void)syscall(SYS_setfsuid, geteuid());
		(void)syscall(SYS_setfsgid, getegid());
		(void)syscall(SYS_setgroups, (size_t)n_own, own);
	}
	return r;
}

int broker_access(struct broker *b, const struct broker_req *q)
{
	struct resolve_ctx ctx = {q->tid, b->root_fd, q->notif, b->cfg.foreign_mounts};
	struct resolved res = RESOLVED_INIT;
	unsigned follow =
	    RESOLVE_ALLOW_DOTDOT | ((q->flags & AT_SYMLINK_NOFOLLOW) ? 0 : RESOLVE_FOLLOW);
	int r = q->at_empty_path ? resolve_target_fd(&ctx, q->dirfd, &res)
				 : resolve_path(&ctx, q->dirfd, q->path, follow, &res);
	if (r >= 0 && !res.exists)
		r = -ENOENT;
	struct proc_ids id;
	if (r >= 0)
		r = proc_get_ids(q->tid, q->notif, &id);
	bool ours =
	    r == -E2BIG; /* more groups than we read: answer with ours (as a rule the same) */
	if (ours)
		r = 0;
	if (r >= 0) {
		/* Without AT_EACCESS the kernel checks with the real ids, with it the fs ids. */
		bool eaccess = q->flags & AT_EACCESS;
		uid_t uid = ours ? geteuid() : id.uid[eaccess ? 3 : 0];
		gid_t gid = ours ? getegid() : id.gid[eaccess ? 3 : 0];
		bool on_fd = res.obj_fd >= 0;
		r = faccess_as(ours ? NULL : &id, uid, gid, on_fd ? res.obj_fd : res.parent_fd,
			       on_fd ? "" : res.name, (int)q->mode,
			       AT_SYMLINK_NOFOLLOW | (on_fd ? AT_EMPTY_PATH : 0));
	}
	resolved_done(&res);
	return r;
}

void broker_audit_invalid(struct broker *b, const struct broker_req *q, int err)
{
	struct broker_call c;
	broker_call_begin(&c, b, NULL, q, NULL, "notify-invalid");
	c.log.path = q->path ? q->path : q->path2;
	c.log.decision = DECIDE_DENY;
	c.log.reason = "invalid-arguments";
	b->stats.requests++;
	b->stats.denied++;
	broker_log_op(&c, err);
	broker_call_end(&c);
}

/* Count the outcome of a file operation and say how the kernel's answer reads in the log. */
static void count_result(struct broker_call *c, int r)
{
	struct broker *b = c->b;
	if (r < 0) {
		broker_resp_done(c->resp);
		set_error(c->resp, r);
		if (refused(c->log.decision))
			b->stats.denied++;
		else
			b->stats.errors++;
	} else if (c->resp->kind == BROKER_RESP_CONTINUE) {
		b->stats.continued++;
		c->log.decision = DECIDE_KERNEL;
	} else {
		b->stats.allowed++;
	}
}

void broker_handle_call(struct broker *b, struct broker_door *door, const struct broker_req *q,
			struct broker_resp *resp)
{
	*resp = BROKER_RESP_INIT(BROKER_RESP_ERROR, -EACCES);
	b->stats.requests++;
	if (q->op >= BROKER_OP_CONNECT) { /* sockets: broker-net.c */
		broker_net_handle(&b->cfg, b->audit, b->root_fd, q, resp);
		b->stats.allowed += resp->kind != BROKER_RESP_ERROR;
		b->stats.denied += resp->kind == BROKER_RESP_ERROR;
		return;
	}
	struct broker_call c;
	broker_call_begin(&c, b, door, q, resp, "notify-op");
	int r;
	bool fd_form = q->fd >= 0 || q->at_empty_path;
	if ((!q->path && !fd_form && q->op != BROKER_OP_SYMLINK) ||
	    ((q->op == BROKER_OP_RENAME || q->op == BROKER_OP_SYMLINK || q->op == BROKER_OP_LINK) &&
	     !q->path2))
		r = -EFAULT; /* a decoder bug must not crash the broker */
	else
		r = broker_ops_perform(&c);
	if (r == -EINPROGRESS && b->batch) {
		broker_resp_done(resp);
		*resp = BROKER_RESP_INIT(BROKER_RESP_RETRY, 0);
		b->stats.requests--; /* counted when it is handled again */
		broker_call_end(&c);
		return;
	}
	count_result(&c, r);
	if (r >= 0) {
		broker_shm_note(b, c.log.real);
		broker_shm_note(b, c.log.real_to);
	}
	char fd_name[32];
	if (!c.log.path && fd_form) {
		snprintf(fd_name, sizeof fd_name, "fd:%d", q->fd >= 0 ? q->fd : q->dirfd);
		c.log.path = fd_name;
	}
	broker_log_op(&c, r < 0 ? r : 0);
	broker_call_end(&c);
}

void broker_handle(struct broker *b, const struct broker_req *q, struct broker_resp *resp)
{
	broker_handle_call(b, NULL, q, resp);
}

/* ---- group commit ---- */

bool broker_batch_useful(const struct broker *b)
{
	/* Until a pre-image needed a flush (a run that only creates files, a workspace on tmpfs),
	 * no batch would have one to share: looking for more waiting requests is a poll(2) per
	 * notification for nothing. */
	return b->turn && b->cfg.backup_enabled && store_turn_durable(b->turn) && b->flushed;
}

void broker_set_batch(struct broker *b, bool on)
{
	b->batch = on && broker_batch_useful(b);
}

int broker_batch_sync(struct broker *b, size_t n)
{
	b->stats.batch_syncs++;
	b->stats.batched += n;
	b->batch_dirty = false;
	return store_sync(b->turn);
}

/* ---- settings of `brokered serve` ---- */

void broker_set_turn(struct broker *b, struct store_turn *t)
{
	b->turn = t;
}

struct store_turn *broker_get_turn(const struct broker *b)
{
	return b->turn;
}

void broker_set_delete_mode(struct broker *b, enum broker_delete_mode m)
{
	b->delete_mode = m == BROKER_DELETE_TRASH ? BROKER_DELETE_TRASH : BROKER_DELETE_UNLINK;
}
