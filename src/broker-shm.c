/* SPDX-License-Identifier: MIT */
/*
 * POSIX shared memory and semaphores: shm_open(3) and sem_open(3) are files in /dev/shm that
 * processes share memory through, not files of the user's. The command may create them, and
 * change, link, rename and remove the ones it created, without backups (they do not outlive a
 * reboot and undo has nothing to give back); the objects of other processes (a browser's, a
 * database's) stay out of its reach, as files outside the workspace do. The broker remembers the
 * inodes it created there for this run. A path in /dev/shm that the policy lets the command write
 * (a workspace there) is not one of these: it is decided and backed up as anywhere.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "basic/path-util.h"
#include "broker-internal.h"
#include "policy.h"

#define SHM_DIR "/dev/shm"

bool broker_is_shm(const struct broker *b, const char *real)
{
	/* Only where nothing but the default decides: a workspace in /dev/shm is the policy's, with
	 * backups, and a rule's decision (a blocklist) stands, as anywhere. */
	const char *reason = NULL;
	return real && path_is_under(real, SHM_DIR) && strcmp(real, SHM_DIR) != 0 &&
	       !path_is_under(real, b->cfg.scratch) &&
	       policy_check(b->policy, real, POLICY_ACCESS_WRITE, &reason) == POLICY_DENY &&
	       reason && strcmp(reason, "default:read-only") == 0;
}

static ssize_t find(const struct broker *b, const struct stat *st)
{
	for (size_t i = 0; i < b->n_shm_own; i++)
		if (b->shm_own[i].dev == st->st_dev && b->shm_own[i].ino == st->st_ino)
			return (ssize_t)i;
	return -1;
}

/* Is the object at real (or, if it does not exist, the directory it would be made in) ours? */
static bool ours(const struct broker *b, const char *real, bool *ret_exists)
{
	struct stat st;
	*ret_exists = lstat(real, &st) == 0;
	if (*ret_exists)
		return find(b, &st) >= 0;
	if (errno != ENOENT)
		return false;
	const char *slash = strrchr(real, '/');
	size_t n = slash ? (size_t)(slash - real) : 0;
	if (n == strlen(SHM_DIR) && strncmp(real, SHM_DIR, n) == 0)
		return true; /* a new object in /dev/shm itself */
	char parent[BROKERED_PATH_MAX];
	if (n >= sizeof parent)
		return false;
	memcpy(parent, real, n);
	parent[n] = '\0';
	return lstat(parent, &st) == 0 && S_ISDIR(st.st_mode) && find(b, &st) >= 0;
}

enum decision broker_shm_decide(struct broker *b, const char *real, unsigned access,
				const char **ret_reason)
{
	if (access == POLICY_ACCESS_READ)
		return DECIDE_UNSET; /* reads: the policy's, as anywhere */
	bool exists;
	if (!ours(b, real, &exists)) {
		*ret_reason = "shm:not-ours";
		return DECIDE_DENY;
	}
	*ret_reason = "shm";
	return DECIDE_BROKER;
}

void broker_shm_note(struct broker *b, const char *real)
{
	struct stat st;
	if (!broker_is_shm(b, real) || lstat(real, &st) < 0 || find(b, &st) >= 0)
		return;
	if (b->n_shm_own == b->cap_shm_own) {
		size_t cap = b->cap_shm_own ? 2 * b->cap_shm_own : 16;
		void *n = realloc(b->shm_own, cap * sizeof *b->shm_own);
		if (!n)
			return; /* not remembered: the command cannot change it again (fails closed)
				 */
		b->shm_own = n;
		b->cap_shm_own = cap;
	}
	b->shm_own[b->n_shm_own].dev = st.st_dev;
	b->shm_own[b->n_shm_own].ino = st.st_ino;
	b->n_shm_own++;
}

void broker_shm_forget(struct broker *b, const char *real)
{
	struct stat st;
	if (!broker_is_shm(b, real) || lstat(real, &st) < 0 || st.st_nlink > 1)
		return; /* sem_open(3) links its object in and removes the first name */
	ssize_t i = find(b, &st);
	if (i >= 0)
		b->shm_own[i] = b->shm_own[--b->n_shm_own];
}
