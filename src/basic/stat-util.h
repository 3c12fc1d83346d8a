/* SPDX-License-Identifier: MIT */
/* Helpers on struct stat (systemd's stat-util.h in spirit). */
#pragma once

#include <stdbool.h>
#include <sys/stat.h>

/* The same inode: the device and the inode number both match (an inode number alone is only
 * unique within one file system). */
static inline bool stat_inode_same(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}
