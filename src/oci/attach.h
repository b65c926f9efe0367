/* An exec of a container's session tied to descriptors of the caller's
 * (the container's process: the supervisor's own stdio; an `exec`: the
 * three its verb passed, or a terminal): what is read from in goes to its
 * stdin, its output is written to out[0] and out[1] (a terminal's all to
 * out[0]). Nothing blocks: output waits in a bounded buffer, and the
 * exec's output is held while it is full; input waits while its queue is
 * full. Runs on the run's loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/loop.h"
#include "run/session.h"

#define AL_OCI_OUT_MAX (1u << 20) /* output waiting per stream, then the exec is held */

struct al_oci_attach {
	struct al_loop *loop; /* borrowed */
	struct al_exec *x;    /* set by the owner once the exec is made */
	int in;		      /* ours (closed by al_oci_attach_free), -1: none */
	int out[2];	      /* ours, -1: none (its output is dropped) */
	bool err_to_out;      /* stderr goes to out[0] (one descriptor for both) */
	struct al_watch *w_in, *w_out[2];
	struct al_timer *retry; /* input that did not fit, or a file to read */
	char *buf[2];
	size_t len[2];
	bool held[2];
	char pend[4096]; /* input read that the queue could not take yet */
	size_t n_pend;
	bool in_done;
};

/* Set a up for in, out, err (taken; err may equal out, or be -1). */
void al_oci_attach_init(struct al_oci_attach *a, struct al_loop *loop, int in, int out, int err);
/* The exec is made: start reading in. */
void al_oci_attach_start(struct al_oci_attach *a, struct al_exec *x);
/* For al_exec_io.output. */
void al_oci_attach_output(void *data, int which, const void *buf, size_t len);
/* Write what waits, blocking at most ms in all (the container's end). */
void al_oci_attach_drain(struct al_oci_attach *a, int ms);
/* Stop feeding the exec (it ended); the outputs stay for the drain. */
void al_oci_attach_stop(struct al_oci_attach *a);
void al_oci_attach_free(struct al_oci_attach *a);
