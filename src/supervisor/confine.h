/* The supervisor confines itself once the command may start: it (and the
 * egress gateway, whose parsers read what the sandbox sends) keeps only
 * what the rest of the run needs. */
#pragma once

#include <stddef.h>

#include "core/error.h"

#define AL_CONFINE_MAX_DIRS 8

struct al_confine {
	/* The run's cgroup directories: read their files (counters, the
	 * process lists), write them (kill), remove directories below. */
	const char *run_dirs[AL_CONFINE_MAX_DIRS];
	size_t n_run_dirs;
	/* A session's: make directories below them too (each exec's cgroup),
	 * and read its own /proc/self/fdinfo (each exec's pid, from its
	 * pidfd). */
	bool make_run_dirs;
	/* Their parents: remove the run's directories from them. */
	const char *parent_dirs[AL_CONFINE_MAX_DIRS];
	size_t n_parent_dirs;
	/* Files it may still read (the gateway's resolver reads /etc/hosts
	 * on every lookup, as the host's own resolution does). */
	const char *read_files[AL_CONFINE_MAX_DIRS];
	size_t n_read_files;
	/* Directories (fds) it makes new files and directories in, by a
	 * temporary name renamed to the final one (--copy-out's HOSTDIRs). */
	const int *write_fds;
	size_t n_write_fds;
	/* Where the result record is written (a temporary file, then a
	 * rename): an O_PATH fd of the directory, or -1. */
	int out_dirfd;
	/* A directory (fd) it removes files from, or -1 (the run's host id
	 * slot). With remove_tree it also lists and removes directories
	 * beneath it (the gvisor backend's run directory); without, files
	 * only: a native run's supervisor gets no more than its slot needs. */
	int remove_dirfd;
	bool remove_tree;
	/* A second directory it removes files from (the slot's, when
	 * remove_dirfd is gvisor's run directory), or -1. */
	int slot_dirfd;
	int landlock_abi; /* 0: no landlock on this machine (the plan allowed that) */
};

/* The part that can be done ahead, so that al_confine_self() costs
 * little where it is called: check that the caller is single-threaded
 * (other threads would stay outside the domain), drop every capability
 * but the kept ones from the bounding set (which only exec uses, and
 * nothing the supervisor starts execs), and build the landlock ruleset
 * for c, opening its paths. *ret_ruleset is the ruleset's fd, or -1 when
 * c->landlock_abi is 0. 0, or -errno with err naming what failed. */
int al_confine_prepare(const struct al_confine *c, int *ret_ruleset, struct al_error *err);

/* Let the confined process read files and directories beneath fd too
 * (before al_confine_self()). 0, or -errno with err set. */
int al_confine_allow_read(int ruleset, int fd, struct al_error *err);

/* Confine the calling process (prepared by al_confine_prepare()): no new
 * privileges; the landlock domain of ruleset (from al_confine_prepare():
 * it executes nothing, reads and writes only c's directories, reads c's
 * files, binds no TCP port); and, where it has them, every capability
 * gone but CAP_KILL (to stop the sandbox's processes, which run under
 * another uid) and CAP_DAC_OVERRIDE (to write the result where the
 * invoking root asked). Irreversible. The caller keeps ruleset open (and
 * closes it). 0, or -errno with err set; on failure the process may be
 * partly confined. */
int al_confine_self(int ruleset, struct al_error *err);

/* The capabilities al_confine_self() keeps, as a CapEff/CapBnd mask. */
#define AL_CONFINE_KEPT_CAPS ((1ULL << 5) | (1ULL << 1)) /* CAP_KILL, CAP_DAC_OVERRIDE */
