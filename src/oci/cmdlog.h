/* A container supervisor's session command's stderr (a guest's VMM says
 * there why its guest failed: a container in a guest, io.airlock.backend),
 * read from a pipe without blocking and logged a line at a time as a
 * warning naming the container. */
#pragma once

#include <stddef.h>

struct al_loop;
struct al_watch;

struct al_oci_cmdlog {
	const char *id; /* the container's, for the lines */
	int rd, wr;	/* the pipe's ends (-1: none); wr goes to the run */
	struct al_watch *w;
	char line[512];
	size_t len;
};

/* The pipe made (both ends -1 where it cannot be: nothing is logged). */
void al_oci_cmdlog_init(struct al_oci_cmdlog *l, const char *id);
/* Read in loop from now on. */
void al_oci_cmdlog_watch(struct al_oci_cmdlog *l, struct al_loop *loop);
/* At the end of the run (or of its making), before the run is freed: the
 * rest read, the last line out, the read end closed, so that nothing the
 * run still writes there at its free can block on it. */
void al_oci_cmdlog_end(struct al_oci_cmdlog *l);
/* After the run is freed: the write end, which its relay borrowed. */
void al_oci_cmdlog_free(struct al_oci_cmdlog *l);
