/* Shared by the front's files (src/serve/api). */
#pragma once

#include "core/error.h"

#include <stdbool.h>

/* Confine the front (after its HTTP daemon is set up, before the first
 * client; the monitor already gave it nobody's uid, an empty capability
 * bounding set and no_new_privs before the exec): not dumpable, a
 * landlock domain with no file access at all (a kernel without landlock
 * is refused unless no_landlock), and a seccomp allowlist of the calls an
 * event loop over sockets makes. 0, or -errno with err set. */
int al_front_confine(bool no_landlock, struct al_error *err);
