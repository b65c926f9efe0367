/* The messages between the OCI verbs and a container's supervisor
 * (super.c), over the Unix socket in the container's state directory
 * (SOCK_SEQPACKET, root's alone: the directory is 0700): one JSON object
 * a message, at most AL_OCI_MSG_MAX bytes, with at most AL_OCI_MSG_FDS
 * descriptors (an exec's stdio) on it. Every message is parsed as
 * hostile: a malformed one ends the connection. */
#pragma once

#include <jansson.h>
#include <stddef.h>

#include "core/error.h"

#define AL_OCI_MSG_MAX (64u << 10)
#define AL_OCI_MSG_FDS 3
/* How long a verb waits for the supervisor's answer. */
#define AL_OCI_ANSWER_MS 30000

/* Send o (not taken) with n fds (n <= AL_OCI_MSG_FDS). 0 or -errno. */
int al_oci_send(int sock, json_t *o, const int *fds, size_t n);

/* Receive one message: *ret a JSON object (new reference), fds[] the
 * descriptors that came with it (*n_fds of them, the caller's; any past
 * AL_OCI_MSG_FDS closed). 0, -EPIPE at the peer's end, -EAGAIN on a
 * non-blocking socket with nothing waiting, or -errno with err set (not
 * JSON, not an object, cut). */
int al_oci_recv(int sock, json_t **ret, int *fds, size_t *n_fds, struct al_error *err);

/* Connect to the supervisor's socket path (a blocking SOCK_SEQPACKET
 * socket with a receive and send timeout of ms). fd or -errno. */
int al_oci_connect(const char *path, int timeout_ms);

/* One request, one answer: o sent, the answer in *ret. An answer with an
 * "error" member becomes -EIO (or its "errno") with err set to it. */
int al_oci_call(int sock, json_t *o, json_t **ret, struct al_error *err);
