/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the git guard's parsers of what a sandboxed command controls — the output of
 * `git config --list --null` for a config file it wrote, a gitfile's "gitdir:" line, and paths
 * (classify, name checks). Each entry must come back whole: the key without '\n', no NUL inside.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "git-guard.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data;
	struct git_config_entry *v;
	size_t n, total = 0;
	if (git_guard_parse_list(buf, size, &v, &n) == 0) {
		for (size_t i = 0; i < n; i++) {
			if (strchr(v[i].key, '\n'))
				abort();
			total += strlen(v[i].key) + 1 + (v[i].value ? strlen(v[i].value) + 1 : 0);
			(void)git_guard_exec_key(v[i].key);
		}
		if (total > size)
			abort();
		git_config_entries_free(v, n);
	}
	char *target = NULL;
	if (git_guard_parse_gitfile(buf, size, &target) == 0) {
		size_t k = strlen(target);
		if (k == 0 || k > size || target[k - 1] == '\n')
			abort();
		free(target);
	}
	char *path = malloc(size + 2);
	if (!path)
		return 0;
	path[0] = '/';
	memcpy(path + 1, data, size);
	path[size + 1] = '\0';
	(void)git_guard_classify(path);
	(void)git_guard_name_allowed(path, GIT_GUARD_MAKE_FILE);
	(void)git_guard_name_allowed(path, GIT_GUARD_MAKE_RENAMED);
	free(path);
	return 0;
}
