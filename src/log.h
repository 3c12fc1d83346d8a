/* SPDX-License-Identifier: MIT */
/*
 * User-facing messages on stderr, prefixed "brokered:". Only the CLI and top-level code log;
 * helpers return -errno and let the caller log once. The log_*_errno() forms return the negative
 * error so a caller can write `return log_error_errno(r, "Failed to open \"%s\": %m", p);`.
 */
#pragma once

#include "basic/macro.h"

enum log_level { LOG_LEVEL_ERROR, LOG_LEVEL_WARNING, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Read BROKERED_DEBUG / BROKERED_QUIET from the environment. */
void log_setup_from_env(void);
int log_internal(enum log_level level, int error, const char *fmt, ...) _printf_(3, 4);

#define log_error(...)		  log_internal(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warning(...)	  log_internal(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_info(...)		  log_internal(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...)		  log_internal(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_error_errno(e, ...)	  log_internal(LOG_LEVEL_ERROR, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_internal(LOG_LEVEL_WARNING, (e), __VA_ARGS__)
#define log_debug_errno(e, ...)	  log_internal(LOG_LEVEL_DEBUG, (e), __VA_ARGS__)
