/* The transparent capture (native backend): the nftables ruleset of the
 * sandbox's network namespace and the helper that installs it. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"

/* The nftables ruleset for the sandbox's network namespace: every TCP
 * connection to a non-loopback address goes to the transparent listener;
 * other traffic to non-loopback addresses is dropped. */
extern const char al_gateway_nft_rules[];

/* Start installing al_gateway_nft_rules in the network namespace of pid:
 * a short-lived helper enters the namespaces (the user namespace too, when
 * rootless) and runs Debian's nft while the sandbox's child builds its
 * root. Returns the helper's pid and, in *ret_errfd, a pipe carrying
 * nft's complaints; finish with al_gateway_rules_wait(). */
pid_t al_gateway_rules_start(pid_t pid, bool rootless, int *ret_errfd, struct al_error *err);

/* Wait for the helper; 0 when the rules are in, else an error naming what
 * went wrong (fail closed: the command must not start without them).
 * Closes errfd. */
int al_gateway_rules_wait(pid_t helper, int errfd, struct al_error *err);
