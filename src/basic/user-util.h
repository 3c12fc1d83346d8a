/* SPDX-License-Identifier: MIT */
#pragma once

/* The home directory: $HOME if absolute, else the password database's; NULL if neither. */
const char *user_home(void);
