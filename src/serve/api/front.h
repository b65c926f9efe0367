/* Shared by the front's files (src/serve/api). */
#pragma once

#include "core/error.h"

/* Confine the front (after its HTTP daemon is set up, before the first
 * client): no supplementary groups, an unprivileged uid and gid (nobody)
 * when started as root, no_new_privs, a landlock domain with no file
 * access at all, and a seccomp allowlist of the calls an event loop over
 * sockets makes. 0, or -errno with err set. */
int al_front_confine(struct al_error *err);
