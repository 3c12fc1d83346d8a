/* SPDX-License-Identifier: MIT */
/*
 * The seccomp supervisor (DESIGN section 3): receives notifications, reads the target's arguments
 * once, checks the notification is still valid, hands a decoded request to the broker and turns
 * the broker's answer into the syscall's result. It never decides policy.
 */
#pragma once

#include <stdbool.h>

struct broker;
struct supervisor;

/* copy_on_write: the filter was built for sandbox.copyOnWrite; the file calls it notifies are
 * the synchronous ones (sandbox.c), which run in the kernel once noted. */
int supervisor_new(int listener_fd, struct broker *b, bool copy_on_write, struct supervisor **ret);
/* Copy-on-write: whether the command asked for a sync (fsync, O_DSYNC, ...) that the volatile
 * overlay skipped; the workspace's file system is then synced after the merge. */
bool supervisor_sync_asked(const struct supervisor *s);
void supervisor_free(struct supervisor *s);
/* Receive and answer one notification (the listener was readable). Failures inside a
 * notification become that syscall's error; only a broken listener is returned (-errno). */
int supervisor_handle_one(struct supervisor *s);
/* Write-opens of FIFOs waiting for a reader (each in a thread of its own): the fd to poll for
 * finished ones (-1: none waiting), collecting them (returns how many still wait), and ending the
 * waits whose target is gone. */
int supervisor_fifo_fd(const struct supervisor *s);
int supervisor_fifo_done(struct supervisor *s);
void supervisor_fifo_check(struct supervisor *s);
