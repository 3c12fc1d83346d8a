/* SPDX-License-Identifier: MIT */
#include "user-util.h"

#include <pwd.h>
#include <stdlib.h>
#include <unistd.h>

const char *user_home(void)
{
	const char *home = getenv("HOME");
	if (home && home[0] == '/')
		return home;
	struct passwd *pw = getpwuid(getuid());
	return pw && pw->pw_dir && pw->pw_dir[0] == '/' ? pw->pw_dir : NULL;
}
