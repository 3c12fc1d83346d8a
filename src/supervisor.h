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
/* Write-opens of FIFOs waiting for a reader (each in a thread of its own): the fd to poll for
 * finished ones (-1: none waiting), collecting them (returns how many still wait), and ending the
 * waits whose target is gone. */
int supervisor_fifo_fd(const struct supervisor *s);
int supervisor_fifo_done(struct supervisor *s);
void supervisor_fifo_check(struct supervisor *s);
