/* Whether a warm pool's sandbox can serve a request (docs/pool.md): the
 * one rule the daemon's pool and the run layer's claim (run/session.h
 * al_run_claim) share. A ready sandbox was made from the pool's plan; a
 * request whose plan differs from it in anything the sandbox was built
 * with is made cold instead. Pure: compares two plans, nothing else. */
#pragma once

#include "core/error.h"
#include "policy/plan.h"

/* 0 when wanted (the request's final plan) fits the sandbox made from
 * pooled: they differ only in what a claim applies (the environment, over
 * the pool's; the workdir; the lifetime; the allowlist, its rules' request
 * options and the secrets the gateway presents). Otherwise -EINVAL with one
 * entry per field that differs in why (may be NULL), its path naming the
 * field ("limits.memory", "fs./etc/airlock/secrets/KEY"). */
int al_plan_fits(const struct al_plan *pooled, const struct al_plan *wanted, struct al_errors *why);
