/* SPDX-License-Identifier: MIT */
/*
 * The seccomp supervisor (DESIGN section 3): receives notifications, reads the target's arguments
 * once, checks the notification is still valid, hands a decoded request to the broker and turns
 * the broker's answer into the syscall's result. It never decides policy.
 */
#pragma once

struct broker;
struct supervisor;

int supervisor_new(int listener_fd, struct broker *b, struct supervisor **ret);
void supervisor_free(struct supervisor *s);
/* Receive and answer one notification (the listener was readable). Failures inside a
 * notification become that syscall's error; only a broken listener is returned (-errno). */
int supervisor_handle_one(struct supervisor *s);
/* Retry deferred opens (FIFOs waiting for a reader). Returns how many are still waiting. */
int supervisor_retry_deferred(struct supervisor *s);
