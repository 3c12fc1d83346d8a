/* SPDX-License-Identifier: MIT */
#include "broker.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "audit.h"
#include "basic/macro.h"
#include "basic/path-util.h"
#include "basic/strbuf.h"
#include "policy.h"
#include "proc.h"
#include "store.h"

struct broker {
	struct broker_config cfg;
	struct audit *audit;
	struct store_turn *turn;
	const struct policy *policy;
	int root_fd;
	struct broker_stats stats;
	char **oversize; /* paths recorded as not backed up */
	size_t n_oversize;
	struct broker_prompt *prompts;
	size_t n_prompts;
	const char *cur_op; /* the operation being decided, for prompt blocks */
};

static const char *const op_names[_BROKER_OP_MAX] = {
	[BROKER_OP_OPEN] = "open",         [BROKER_OP_TRUNCATE] = "truncate",
	[BROKER_OP_UNLINK] = "unlink",     [BROKER_OP_RENAME] = "rename",
	[BROKER_OP_MKDIR] = "mkdir",       [BROKER_OP_MKNOD] = "mknod",
	[BROKER_OP_LINK] = "link",         [BROKER_OP_SYMLINK] = "symlink",
	[BROKER_OP_CHMOD] = "chmod",       [BROKER_OP_CHOWN] = "chown",
	[BROKER_OP_UTIMES] = "utimes",     [BROKER_OP_SETXATTR] = "setxattr",
	[BROKER_OP_REMOVEXATTR] = "removexattr",
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

static void record_prompt(struct broker *b, const char *real, unsigned access, const char *rule)
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
	p->op = strdup(b->cur_op ? b->cur_op : "-");
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

void broker_resp_done(struct broker_resp *resp)
{
	resp->fd = safe_close(resp->fd);
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

enum decision {
	DECIDE_DENY,
	DECIDE_BROKER, /* allowed: the broker performs it (with backup) */
	DECIDE_KERNEL, /* allowed by Landlock: let the kernel run it */
	DECIDE_PROMPT, /* refused until the user approves (recorded as a prompt block) */
};

static bool refused(enum decision d)
{
	return d == DECIDE_DENY || d == DECIDE_PROMPT;
}

static const char *decision_name(enum decision d)
{
	switch (d) {
	case DECIDE_BROKER:
		return "allow";
	case DECIDE_KERNEL:
		return "sandbox";
	case DECIDE_PROMPT:
		return "prompt";
	case DECIDE_DENY:
	default:
		return "deny";
	}
}

/* Device nodes Landlock lets the target write by itself (sandbox.c grants the same list). */
static bool is_kernel_writable_device(const char *real, const struct stat *st)
{
	static const char *const devs[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random",
					   "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/console"};
	if (!real)
		return false;
	if (path_is_under(real, "/dev/pts"))
		return true;
	for (size_t i = 0; i < ELEMENTSOF(devs); i++)
		if (strcmp(real, devs[i]) == 0)
			return !st || S_ISCHR(st->st_mode);
	return false;
}

static enum decision decide(struct broker *b, const char *real, unsigned access,
			    const struct stat *st, const char **ret_reason)
{
	*ret_reason = NULL;
	if (!real)
		return DECIDE_DENY;
	/* Without Landlock nothing but the broker enforces: it performs everything itself (a
	 * CONTINUE would let a racing thread swap the path after the check). */
	enum decision kernel = b->cfg.kernel_enforces ? DECIDE_KERNEL : DECIDE_BROKER;
	if (path_is_under(real, b->cfg.scratch)) {
		*ret_reason = "scratch";
		return kernel;
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
		record_prompt(b, real, access, reason);
		return DECIDE_PROMPT;
	}
	return DECIDE_DENY;
}

/* ---- audit ---- */

struct op_log {
	const char *phase;
	const char *path, *real, *to, *real_to;
	enum decision decision;
	const char *reason;
	const char *backup; /* what the store did */
};

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

static void log_op(struct broker *b, const struct broker_req *q, const struct op_log *l,
		   int result, const struct timespec *t0)
{
	struct timespec t1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	uint64_t us = (uint64_t)((t1.tv_sec - t0->tv_sec) * 1000000 + (t1.tv_nsec - t0->tv_nsec) / 1000);
	char res[32];
	const char *rn = errno_name(-MIN(result, 0));
	if (!rn) {
		snprintf(res, sizeof res, "errno%d", -result);
		rn = res;
	}
	char extra[256] = "";
	int n = 0;
	n += snprintf(extra + n, sizeof extra - (size_t)n, "syscall=%s",
		      q->syscall_name ? q->syscall_name : "-");
	if (l->reason)
		n += snprintf(extra + n, sizeof extra - (size_t)n, " rule=%s", l->reason);
	if (l->backup && n < (int)sizeof extra)
		snprintf(extra + n, sizeof extra - (size_t)n, " backup=%s", l->backup);
	struct audit_record rec = {
		.phase = l->phase,
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

/* ---- the pre-modification hook ---- */

static const char *store_result_name(enum store_result r)
{
	switch (r) {
	case STORE_RESULT_ALREADY:
		return "already";
	case STORE_RESULT_ABSENT:
		return "absent";
	case STORE_RESULT_SAVED:
		return "saved";
	case STORE_RESULT_NOT_BACKED_UP:
		return "not-backed-up";
	case STORE_RESULT_DISABLED:
	default:
		return "disabled";
	}
}

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
 * Every broker path that is about to change or create something at parent_fd/name calls this one
 * function first. Fails closed: if the pre-image cannot be recorded, the change must not happen.
 */
static int broker_before_change(struct broker *b, int parent_fd, const char *name,
				const char *real, unsigned flags, bool *ret_consumed,
				struct op_log *l)
{
	if (ret_consumed)
		*ret_consumed = false;
	if (!b->turn || !b->cfg.backup_enabled) {
		l->backup = "disabled";
		return 0;
	}
	enum store_result res = STORE_RESULT_DISABLED;
	bool consumed = false;
	int r = store_preimage(b->turn, parent_fd, name, real, flags, &res, &consumed);
	if (r < 0) {
		l->backup = "failed";
		/* An oversize file under deny_oversize is a refusal, not an I/O error. */
		return r == -EFBIG ? -EACCES : r;
	}
	l->backup = store_result_name(res);
	switch (res) {
	case STORE_RESULT_SAVED:
		b->stats.backups_saved++;
		r = store_sync(b->turn);
		if (r < 0) {
			l->backup = "sync-failed";
			return r;
		}
		break;
	case STORE_RESULT_ABSENT:
		b->stats.backups_absent++;
		break;
	case STORE_RESULT_NOT_BACKED_UP:
		b->stats.not_backed_up++;
		remember_oversize(b, real);
		break;
	case STORE_RESULT_ALREADY:
	case STORE_RESULT_DISABLED:
	default:
		break;
	}
	if (ret_consumed)
		*ret_consumed = consumed;
	return 0;
}

/* ---- helpers ---- */

static void set_error(struct broker_resp *resp, int err)
{
	resp->kind = BROKER_RESP_ERROR;
	resp->value = err < 0 ? err : -EIO;
}

static void set_value(struct broker_resp *resp, int64_t v)
{
	resp->kind = BROKER_RESP_VALUE;
	resp->value = v;
}

static int target_umask(pid_t tid, mode_t *ret)
{
	int r = proc_get_umask(tid, ret);
	if (r < 0)
		*ret = 022;
	return r;
}

static void proc_fd_path(char *buf, size_t n, int fd)
{
	snprintf(buf, n, "/proc/self/fd/%d", fd);
}

/* ---- open ---- */

static int open_tmpfile(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
			struct resolved *res, struct op_log *l)
{
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd}, q->dirfd, q->path,
			     RESOLVE_FOLLOW | RESOLVE_ALLOW_DOTDOT, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (!S_ISDIR(res->st.st_mode))
		return -ENOTDIR;
	l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, &res->st, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	mode_t um;
	target_umask(q->tid, &um);
	_cleanup_close_ int dfd = openat(res->parent_fd, res->name, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return negative_errno();
	int fd = openat(dfd, ".", (int)(q->flags | O_CLOEXEC | O_NOCTTY), q->mode & ~um & 07777);
	if (fd < 0)
		return negative_errno();
	resp->kind = BROKER_RESP_FD;
	resp->fd = fd;
	resp->cloexec = q->flags & O_CLOEXEC;
	return 0;
}

/* Open an existing non-regular file in the broker's zone without ever blocking. */
static int open_special(int parent_fd, const char *name, int flags)
{
	int fd = openat(parent_fd, name, flags | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0)
		return negative_errno();
	if (!(flags & O_NONBLOCK)) {
		int fl = fcntl(fd, F_GETFL);
		if (fl >= 0)
			(void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	}
	return fd;
}

static int do_open(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		   struct resolved *res, struct op_log *l)
{
	l->phase = "notify-open";
	if ((q->flags & O_TMPFILE) == O_TMPFILE)
		return open_tmpfile(b, q, resp, res, l);

	int acc = (int)(q->flags & O_ACCMODE);
	bool creat = q->flags & O_CREAT, excl = q->flags & O_EXCL;
	bool nofollow = q->flags & O_NOFOLLOW;
	unsigned rflags = (creat && excl) || nofollow ? 0 : RESOLVE_FOLLOW;
	rflags |= RESOLVE_ALLOW_DOTDOT;
	struct resolve_ctx ctx = {q->tid, b->root_fd};

	for (int attempt = 0; attempt < 8; attempt++) {
		resolved_done(res);
		int r = resolve_path(&ctx, q->dirfd, q->path, rflags, res);
		if (r < 0)
			return r;
		l->real = res->real;

		if (res->obj_fd >= 0) {
			/* A magic link (/proc/PID/fd/N, /dev/stdout, ...): decide on what it names. */
			if (!S_ISREG(res->st.st_mode) && !S_ISDIR(res->st.st_mode)) {
				l->decision = DECIDE_KERNEL;
				l->reason = "magic-link";
				resp->kind = BROKER_RESP_CONTINUE;
				return 0;
			}
			if (S_ISDIR(res->st.st_mode))
				return -EISDIR;
			l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, &res->st, &l->reason);
			if (refused(l->decision))
				return -EACCES;
			if (l->decision == DECIDE_KERNEL) {
				resp->kind = BROKER_RESP_CONTINUE;
				return 0;
			}
			/* Back up by the file's own name, then reopen the object itself. */
			_cleanup_free_ char *parent = NULL;
			const char *name;
			if (!res->real || path_split(res->real, &parent, &name) < 0)
				return -EACCES;
			_cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
			struct stat st;
			if (pfd < 0 || fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    st.st_ino != res->st.st_ino || st.st_dev != res->st.st_dev)
				return -EACCES;
			if (acc != O_RDONLY || (q->flags & O_TRUNC)) {
				r = broker_before_change(b, pfd, name, res->real, 0, NULL, l);
				if (r < 0)
					return r;
			}
			char p[64];
			proc_fd_path(p, sizeof p, res->obj_fd);
			int fd = open(p, (int)((q->flags & ~(uint64_t)(O_CREAT | O_EXCL)) | O_CLOEXEC | O_NOCTTY));
			if (fd < 0)
				return negative_errno();
			resp->kind = BROKER_RESP_FD;
			resp->fd = fd;
			resp->cloexec = q->flags & O_CLOEXEC;
			return 0;
		}

		if (!res->exists) {
			if (!creat)
				return -ENOENT;
			if (res->trailing_slash)
				return -EISDIR;
			l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, NULL, &l->reason);
			if (refused(l->decision))
				return -EACCES;
			if (l->decision == DECIDE_KERNEL) {
				resp->kind = BROKER_RESP_CONTINUE;
				return 0;
			}
			r = broker_before_change(b, res->parent_fd, res->name, res->real, 0, NULL, l);
			if (r < 0)
				return r;
			mode_t um;
			target_umask(q->tid, &um);
			int fd = openat(res->parent_fd, res->name,
					(int)(q->flags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY),
					q->mode & ~um & 07777);
			if (fd < 0) {
				if (errno == EEXIST && !excl)
					continue; /* created meanwhile: open the existing file */
				return negative_errno();
			}
			resp->kind = BROKER_RESP_FD;
			resp->fd = fd;
			resp->cloexec = q->flags & O_CLOEXEC;
			resp->created_parent_fd = TAKE_FD(res->parent_fd);
			resp->created_name = TAKE_PTR(res->name);
			return 0;
		}

		if (creat && excl)
			return -EEXIST;
		if (S_ISLNK(res->st.st_mode))
			return -ELOOP; /* O_NOFOLLOW on a symlink */
		l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, &res->st, &l->reason);
		if (refused(l->decision))
			return -EACCES;
		if (l->decision == DECIDE_KERNEL) {
			resp->kind = BROKER_RESP_CONTINUE;
			return 0;
		}
		int oflags = (int)((q->flags & ~(uint64_t)(O_CREAT | O_EXCL)) | O_NOFOLLOW | O_CLOEXEC |
				   O_NOCTTY);
		if (!S_ISREG(res->st.st_mode)) {
			if (S_ISDIR(res->st.st_mode))
				return acc != O_RDONLY ? -EISDIR : (creat ? -EISDIR : -EISDIR);
			int fd = open_special(res->parent_fd, res->name, oflags);
			if (fd == -ENXIO && S_ISFIFO(res->st.st_mode) && !(q->flags & O_NONBLOCK)) {
				/* Natively this blocks until a reader comes; the broker must not. */
				fd = openat(res->parent_fd, res->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
				if (fd < 0)
					return negative_errno();
				resp->kind = BROKER_RESP_DEFER;
				resp->fd = fd;
				resp->cloexec = q->flags & O_CLOEXEC;
				resp->defer_flags = oflags & ~O_NOFOLLOW;
				return 0;
			}
			if (fd < 0)
				return fd;
			resp->kind = BROKER_RESP_FD;
			resp->fd = fd;
			resp->cloexec = q->flags & O_CLOEXEC;
			return 0;
		}
		if (acc != O_RDONLY || (q->flags & O_TRUNC)) {
			r = broker_before_change(b, res->parent_fd, res->name, res->real, 0, NULL, l);
			if (r < 0)
				return r;
		}
		int fd = openat(res->parent_fd, res->name, oflags);
		if (fd < 0) {
			if (errno == ELOOP || errno == ENOENT)
				continue; /* replaced meanwhile: resolve again */
			return negative_errno();
		}
		struct stat st;
		if (fstat(fd, &st) == 0 && (st.st_ino != res->st.st_ino || st.st_dev != res->st.st_dev)) {
			close(fd);
			continue;
		}
		resp->kind = BROKER_RESP_FD;
		resp->fd = fd;
		resp->cloexec = q->flags & O_CLOEXEC;
		return 0;
	}
	return -EAGAIN;
}

/* ---- truncate ---- */

static int do_truncate(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		       struct resolved *res, struct op_log *l)
{
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd}, q->dirfd, q->path,
			     RESOLVE_FOLLOW, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (S_ISDIR(res->st.st_mode))
		return -EISDIR;
	if (!S_ISREG(res->st.st_mode))
		return -EINVAL;
	if ((int64_t)q->length < 0)
		return -EINVAL;
	l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, &res->st, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	_cleanup_close_ int fd = res->obj_fd >= 0 ? -1 :
		openat(res->parent_fd, res->name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (res->obj_fd >= 0) {
		char p[64];
		proc_fd_path(p, sizeof p, res->obj_fd);
		fd = open(p, O_WRONLY | O_CLOEXEC | O_NONBLOCK);
	}
	if (fd < 0)
		return negative_errno();
	if (res->parent_fd >= 0) {
		r = broker_before_change(b, res->parent_fd, res->name, res->real, 0, NULL, l);
		if (r < 0)
			return r;
	}
	if (ftruncate(fd, (off_t)q->length) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

/* ---- unlink / rmdir ---- */

static int do_unlink(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		     struct resolved *res, struct op_log *l)
{
	bool rmdir_ = q->flags & AT_REMOVEDIR;
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd}, q->dirfd, q->path, 0, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!strcmp(res->name, "."))
		return -EINVAL;
	if (!strcmp(res->name, ".."))
		return -ENOTEMPTY;
	if (!res->exists)
		return -ENOENT;
	bool isdir = S_ISDIR(res->st.st_mode);
	if (rmdir_ && !isdir)
		return -ENOTDIR;
	if (!rmdir_ && isdir)
		return -EISDIR;
	if (!rmdir_ && res->trailing_slash)
		return -ENOTDIR;
	l->decision = decide(b, res->real, POLICY_ACCESS_DELETE, &res->st, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 0;
	}
	if (rmdir_) {
		/* Only an empty directory can go; don't record a pre-image for a refusal. */
		_cleanup_close_ int dfd = openat(res->parent_fd, res->name,
						  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (dfd >= 0) {
			DIR *d = fdopendir(dfd);
			if (d) {
				dfd = -1;
				struct dirent *de;
				bool empty = true;
				while ((de = readdir(d)))
					if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
						empty = false;
						break;
					}
				closedir(d);
				if (!empty)
					return -ENOTEMPTY;
			}
		}
	}
	bool consumed = false;
	r = broker_before_change(b, res->parent_fd, res->name, res->real, STORE_CONSUME, &consumed, l);
	if (r < 0)
		return r;
	if (!consumed && unlinkat(res->parent_fd, res->name, rmdir_ ? AT_REMOVEDIR : 0) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

/* ---- rename ---- */

static int do_rename(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		     struct resolved *res, struct op_log *l)
{
	struct resolve_ctx ctx = {q->tid, b->root_fd};
	struct resolved dst = RESOLVED_INIT;
	int r = resolve_path(&ctx, q->dirfd, q->path, 0, res);
	if (r < 0)
		return r;
	l->real = res->real;
	r = resolve_path(&ctx, q->dirfd2, q->path2, 0, &dst);
	if (r < 0)
		goto out;
	l->real_to = dst.real;
	l->to = q->path2;
	if (!res->exists) {
		r = -ENOENT;
		goto out;
	}
	if (!strcmp(res->name, ".") || !strcmp(res->name, "..") || !strcmp(dst.name, ".") ||
	    !strcmp(dst.name, "..")) {
		r = -EBUSY;
		goto out;
	}
	bool exchange = q->flags & RENAME_EXCHANGE;
	if ((q->flags & RENAME_NOREPLACE) && dst.exists) {
		r = -EEXIST;
		goto out;
	}
	if (exchange && !dst.exists) {
		r = -ENOENT;
		goto out;
	}
	/* Both names must be allowed: delete on the source, write on the target. */
	const char *reason2 = NULL;
	enum decision d1 = decide(b, res->real, exchange ? POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE : POLICY_ACCESS_DELETE,
				  &res->st, &l->reason);
	enum decision d2 = decide(b, dst.real, exchange ? POLICY_ACCESS_WRITE | POLICY_ACCESS_DELETE : POLICY_ACCESS_WRITE,
				  dst.exists ? &dst.st : NULL, &reason2);
	if (refused(d1) || refused(d2)) {
		l->decision = refused(d1) ? d1 : d2;
		if (!refused(d1))
			l->reason = reason2;
		r = -EACCES;
		goto out;
	}
	if (d1 == DECIDE_KERNEL && d2 == DECIDE_KERNEL) {
		l->decision = DECIDE_KERNEL;
		resp->kind = BROKER_RESP_CONTINUE;
		r = 0;
		goto out;
	}
	l->decision = DECIDE_BROKER;
	/* Pre-images: the source lives on under the new name, so it is copied (a directory with its
	 * whole tree); the replaced target is recorded as well. Nothing is consumed: if the rename
	 * fails after this, both names are untouched. */
	if (d1 == DECIDE_BROKER) {
		r = broker_before_change(b, res->parent_fd, res->name, res->real,
					 S_ISDIR(res->st.st_mode) ? STORE_TREE : 0, NULL, l);
		if (r < 0)
			goto out;
	}
	if (d2 == DECIDE_BROKER) {
		unsigned f = exchange && dst.exists && S_ISDIR(dst.st.st_mode) ? STORE_TREE : 0;
		r = broker_before_change(b, dst.parent_fd, dst.name, dst.real, f, NULL, l);
		if (r < 0)
			goto out;
	}
	if (renameat2(res->parent_fd, res->name, dst.parent_fd, dst.name, (unsigned)q->flags) < 0) {
		r = negative_errno();
		goto out;
	}
	set_value(resp, 0);
	r = 0;
out:
	if (r < 0 || resp->kind != BROKER_RESP_CONTINUE) {
		/* keep dst's strings alive for the audit line: copy them over */
	}
	if (l->real_to == dst.real) {
		static __thread char buf[BROKERED_PATH_MAX + 1];
		if (dst.real) {
			snprintf(buf, sizeof buf, "%s", dst.real);
			l->real_to = buf;
		}
	}
	resolved_done(&dst);
	return r;
}

/* ---- mkdir, mknod, symlink: creations ---- */

static int create_common(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
			 struct resolved *res, struct op_log *l, int dirfd, const char *path)
{
	int r = resolve_path(&(struct resolve_ctx){q->tid, b->root_fd}, dirfd, path, 0, res);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!strcmp(res->name, ".") || !strcmp(res->name, ".."))
		return -EEXIST;
	if (res->exists)
		return -EEXIST;
	if (res->trailing_slash && q->op != BROKER_OP_MKDIR)
		return q->op == BROKER_OP_SYMLINK ? -ENOENT : -EISDIR;
	l->decision = decide(b, res->real, POLICY_ACCESS_WRITE, NULL, &l->reason);
	if (refused(l->decision))
		return -EACCES;
	if (l->decision == DECIDE_KERNEL) {
		resp->kind = BROKER_RESP_CONTINUE;
		return 1;
	}
	return broker_before_change(b, res->parent_fd, res->name, res->real, 0, NULL, l);
}

static int do_mkdir(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		    struct resolved *res, struct op_log *l)
{
	int r = create_common(b, q, resp, res, l, q->dirfd, q->path);
	if (r != 0)
		return r < 0 ? r : 0;
	mode_t um;
	target_umask(q->tid, &um);
	if (mkdirat(res->parent_fd, res->name, q->mode & ~um & 07777) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

static int do_mknod(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		    struct resolved *res, struct op_log *l)
{
	mode_t type = q->mode & S_IFMT;
	if (type == S_IFCHR || type == S_IFBLK)
		return -EPERM; /* a device node in the workspace would open the raw device */
	if (type != 0 && type != S_IFREG && type != S_IFIFO && type != S_IFSOCK)
		return -EINVAL;
	int r = create_common(b, q, resp, res, l, q->dirfd, q->path);
	if (r != 0)
		return r < 0 ? r : 0;
	mode_t um;
	target_umask(q->tid, &um);
	if (mknodat(res->parent_fd, res->name, (q->mode & ~um & 07777) | (type ? type : S_IFREG), 0) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

static int do_symlink(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		      struct resolved *res, struct op_log *l)
{
	if (!q->symlink_target || !*q->symlink_target)
		return -ENOENT;
	l->to = q->symlink_target;
	int r = create_common(b, q, resp, res, l, q->dirfd2, q->path2);
	if (r != 0)
		return r < 0 ? r : 0;
	if (symlinkat(q->symlink_target, res->parent_fd, res->name) < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

/* ---- link ---- */

static int do_link(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		   struct resolved *res, struct op_log *l)
{
	struct resolve_ctx ctx = {q->tid, b->root_fd};
	struct resolved src = RESOLVED_INIT;
	int r;
	if (q->at_empty_path)
		r = resolve_target_fd(&ctx, q->dirfd, &src);
	else
		r = resolve_path(&ctx, q->dirfd, q->path,
				 (q->flags & AT_SYMLINK_FOLLOW) ? RESOLVE_FOLLOW : 0, &src);
	if (r < 0)
		goto out;
	if (!src.exists) {
		r = -ENOENT;
		goto out;
	}
	if (S_ISDIR(src.st.st_mode)) {
		r = -EPERM;
		goto out;
	}
	/* A hard link gives a second name to the same inode: the source must be writable by policy
	 * too, or a protected file could be written through its new name in the workspace. */
	const char *reason = NULL;
	enum decision sd = src.real ? decide(b, src.real, POLICY_ACCESS_WRITE, &src.st, &reason)
				    : DECIDE_BROKER;
	if (refused(sd)) {
		l->decision = sd;
		l->reason = reason;
		static __thread char buf[BROKERED_PATH_MAX + 1];
		snprintf(buf, sizeof buf, "%s", src.real);
		l->real = buf;
		r = -EACCES;
		goto out;
	}
	r = create_common(b, q, resp, res, l, q->dirfd2, q->path2);
	l->to = q->path2;
	l->real_to = res->real;
	if (r != 0) {
		r = r < 0 ? r : 0;
		goto out;
	}
	if (src.obj_fd >= 0) {
		char p[64];
		proc_fd_path(p, sizeof p, src.obj_fd);
		r = linkat(AT_FDCWD, p, res->parent_fd, res->name, AT_SYMLINK_FOLLOW);
	} else {
		r = linkat(src.parent_fd, src.name, res->parent_fd, res->name, 0);
	}
	if (r < 0) {
		r = negative_errno();
		goto out;
	}
	set_value(resp, 0);
	r = 0;
out:
	resolved_done(&src);
	return r;
}

/* ---- metadata: chmod, chown, utimes, xattrs ---- */

static int resolve_meta(struct broker *b, const struct broker_req *q, struct resolved *res,
			bool follow)
{
	struct resolve_ctx ctx = {q->tid, b->root_fd};
	if (q->fd >= 0 || q->at_empty_path)
		return resolve_target_fd(&ctx, q->fd >= 0 ? q->fd : q->dirfd, res);
	return resolve_path(&ctx, q->dirfd, q->path, (follow ? RESOLVE_FOLLOW : 0) | RESOLVE_ALLOW_DOTDOT,
			    res);
}

static int do_meta(struct broker *b, const struct broker_req *q, struct broker_resp *resp,
		   struct resolved *res, struct op_log *l)
{
	bool follow = !(q->flags & AT_SYMLINK_NOFOLLOW);
	int r = resolve_meta(b, q, res, follow);
	if (r < 0)
		return r;
	l->real = res->real;
	if (!res->exists)
		return -ENOENT;
	if (res->obj_fd >= 0 && !res->real) {
		/* Pipes, sockets, unlinked files: nothing on disk to protect or back up, and
		 * Landlock does not see metadata calls — allow only where nothing is named. */
		if (S_ISREG(res->st.st_mode) || S_ISDIR(res->st.st_mode))
			l->decision = DECIDE_BROKER;
		else
			l->decision = DECIDE_BROKER;
		l->reason = "unnamed";
	} else {
		l->decision = decide(b, res->real, POLICY_ACCESS_METADATA, &res->st, &l->reason);
		if (refused(l->decision))
			return -EACCES;
		/* Landlock does not cover metadata calls; the broker performs them everywhere. */
		if (l->decision == DECIDE_KERNEL)
			l->decision = DECIDE_BROKER;
	}
	if (q->op == BROKER_OP_CHMOD && !follow && S_ISLNK(res->st.st_mode))
		return -EOPNOTSUPP;

	/* The object to act on: a path through our own fd of it. */
	_cleanup_close_ int ofd = -1;
	if (res->obj_fd >= 0) {
		ofd = dup(res->obj_fd);
	} else {
		ofd = openat(res->parent_fd, res->name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		struct stat st;
		if (ofd >= 0 && (fstat(ofd, &st) < 0 || st.st_ino != res->st.st_ino))
			return -EAGAIN;
	}
	if (ofd < 0)
		return negative_errno();
	char p[64];
	proc_fd_path(p, sizeof p, ofd);

	if (res->parent_fd >= 0 && res->name && res->real && !path_is_under(res->real, b->cfg.scratch)) {
		r = broker_before_change(b, res->parent_fd, res->name, res->real, STORE_METADATA, NULL, l);
		if (r < 0)
			return r;
	} else if (res->real && res->obj_fd >= 0 && S_ISREG(res->st.st_mode) &&
		   !path_is_under(res->real, b->cfg.scratch)) {
		/* fd form on a named file: back it up by its name. */
		_cleanup_free_ char *parent = NULL;
		const char *name;
		if (path_split(res->real, &parent, &name) == 0) {
			_cleanup_close_ int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
			struct stat st;
			if (pfd >= 0 && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    st.st_ino == res->st.st_ino && st.st_dev == res->st.st_dev) {
				r = broker_before_change(b, pfd, name, res->real, STORE_METADATA, NULL, l);
				if (r < 0)
					return r;
			}
		}
	}

	switch (q->op) {
	case BROKER_OP_CHMOD:
		r = S_ISLNK(res->st.st_mode) ? fchmodat(res->parent_fd, res->name, q->mode, AT_SYMLINK_NOFOLLOW)
					     : chmod(p, q->mode & 07777);
		break;
	case BROKER_OP_CHOWN:
		r = fchownat(ofd, "", q->uid, q->gid, AT_EMPTY_PATH);
		break;
	case BROKER_OP_UTIMES:
		if (S_ISLNK(res->st.st_mode))
			r = utimensat(res->parent_fd, res->name, q->times_now ? NULL : q->times,
				      AT_SYMLINK_NOFOLLOW);
		else
			r = utimensat(AT_FDCWD, p, q->times_now ? NULL : q->times, 0);
		break;
	case BROKER_OP_SETXATTR:
		r = setxattr(p, q->xattr_name, q->xattr_value, q->xattr_size, q->xattr_flags);
		break;
	case BROKER_OP_REMOVEXATTR:
		r = removexattr(p, q->xattr_name);
		break;
	default:
		return -ENOSYS;
	}
	if (r < 0)
		return negative_errno();
	set_value(resp, 0);
	return 0;
}

void broker_handle(struct broker *b, const struct broker_req *q, struct broker_resp *resp)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	*resp = (struct broker_resp){.kind = BROKER_RESP_ERROR, .value = -EACCES, .fd = -1,
				     .created_parent_fd = -1};
	struct resolved res = RESOLVED_INIT;
	struct op_log l = {.phase = "notify-op", .path = q->path, .decision = DECIDE_DENY};
	if (!q->path && q->path2 && q->op != BROKER_OP_SYMLINK)
		l.path = q->path2;
	if (q->op == BROKER_OP_SYMLINK)
		l.path = q->path2;
	b->stats.requests++;
	b->cur_op = broker_op_name(q->op);

	int r;
	switch (q->op) {
	case BROKER_OP_OPEN:
		r = do_open(b, q, resp, &res, &l);
		break;
	case BROKER_OP_TRUNCATE:
		r = do_truncate(b, q, resp, &res, &l);
		break;
	case BROKER_OP_UNLINK:
		r = do_unlink(b, q, resp, &res, &l);
		break;
	case BROKER_OP_RENAME:
		r = do_rename(b, q, resp, &res, &l);
		break;
	case BROKER_OP_MKDIR:
		r = do_mkdir(b, q, resp, &res, &l);
		break;
	case BROKER_OP_MKNOD:
		r = do_mknod(b, q, resp, &res, &l);
		break;
	case BROKER_OP_LINK:
		r = do_link(b, q, resp, &res, &l);
		break;
	case BROKER_OP_SYMLINK:
		r = do_symlink(b, q, resp, &res, &l);
		break;
	case BROKER_OP_CHMOD:
	case BROKER_OP_CHOWN:
	case BROKER_OP_UTIMES:
	case BROKER_OP_SETXATTR:
	case BROKER_OP_REMOVEXATTR:
		r = do_meta(b, q, resp, &res, &l);
		break;
	default:
		r = -ENOSYS;
		break;
	}
	if (r < 0) {
		broker_resp_done(resp);
		set_error(resp, r);
		if (refused(l.decision))
			b->stats.denied++;
		else
			b->stats.errors++;
	} else if (resp->kind == BROKER_RESP_CONTINUE) {
		b->stats.continued++;
		l.decision = DECIDE_KERNEL;
	} else {
		b->stats.allowed++;
	}
	if (!l.path && (q->fd >= 0 || q->at_empty_path)) {
		static __thread char fdp[32];
		snprintf(fdp, sizeof fdp, "fd:%d", q->fd >= 0 ? q->fd : q->dirfd);
		l.path = fdp;
	}
	log_op(b, q, &l, r < 0 ? r : 0, &t0);
	resolved_done(&res);
}
