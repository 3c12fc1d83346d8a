/* SPDX-License-Identifier: MIT */
/*
 * hwm.so: LD_PRELOAD helper of bench/peers.sh. When BENCH_HWM_OUT is set, it writes the VmHWM
 * (peak resident set, kB) of *this* process only to that file when the process exits — used on
 * `brokered run` so that the supervisor's own peak is measured, not the largest of the commands
 * it runs (what /usr/bin/time or wait4's ru_maxrss would report). The constructor removes
 * BENCH_HWM_OUT and LD_PRELOAD from the environment, so the sandboxed command never loads it.
 *
 *   cc -O2 -shared -fPIC -o hwm.so hwm.c
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[4096];
static pid_t self;

__attribute__((constructor)) static void hwm_init(void)
{
	const char *o = getenv("BENCH_HWM_OUT");
	if (!o || strlen(o) >= sizeof(out))
		return;
	strcpy(out, o);
	self = getpid();
	unsetenv("BENCH_HWM_OUT");
	unsetenv("LD_PRELOAD");
}

__attribute__((destructor)) static void hwm_fini(void)
{
	if (!out[0] || getpid() != self) /* a forked child that called exit(): not the supervisor */
		return;
	FILE *s = fopen("/proc/self/status", "r"), *f;
	char line[256];
	if (!s)
		return;
	while (fgets(line, sizeof(line), s))
		if (!strncmp(line, "VmHWM:", 6) && (f = fopen(out, "w"))) {
			fprintf(f, "%ld\n", strtol(line + 6, NULL, 10));
			fclose(f);
		}
	fclose(s);
}
