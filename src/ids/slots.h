/* Host id ranges for runs as root: each live run holds a slot of a pool,
 * and its sandbox's ids map into that slot's 65536 host ids, so that no
 * two live runs share a host uid — nor the counters the kernel keeps per
 * host user (pipe pages, descriptors in flight, inotify, message queues,
 * user namespaces; docs/security.md "Tenants apart").
 *
 * A slot is a lock file, DIR/SLOT (decimal), that the run publishes
 * already locked (an open file description lock, F_OFD_SETLK) by linking
 * it into place, and removes when its sandbox is gone. A file whose lock
 * is free belongs to a run that died: al_ids_gc() removes it once no
 * process on the host has an id in its range. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "core/error.h"

/* The pool: 0x70000000 up to systemd's foreign range (0x7FFE0000). It
 * lies above systemd's container ranges (524288–1879048191) and below
 * 2^31, past which some programs take uids for negative numbers. */
#define AL_IDS_POOL_BASE  0x70000000u
#define AL_IDS_SLOT_SIZE  65536u
#define AL_IDS_POOL_SLOTS 4094u
#define AL_IDS_DIR	  "/run/airlock/ids"

struct al_id_slot {
	int fd;	   /* the locked slot file; -1: none held */
	int dirfd; /* the pool's directory */
	int slot;  /* -1: none held */
};

#define AL_ID_SLOT_NONE                                                                            \
	{                                                                                          \
		.fd = -1, .dirfd = -1, .slot = -1                                                  \
	}

static inline uid_t al_ids_slot_base(unsigned slot)
{
	return AL_IDS_POOL_BASE + slot * AL_IDS_SLOT_SIZE;
}

/* Whether [base, base + AL_IDS_SLOT_SIZE) overlaps the pool. */
bool al_ids_in_pool(unsigned long long base);

/* Take a free slot in dir (NULL: AL_IDS_DIR, created root-owned 0700
 * when missing) for run_id. dir must be owned by us, be no symbolic link
 * and be writable by no one else. When every slot is taken, slots of dead
 * runs are reclaimed first (as al_ids_gc); still none: -EUSERS. */
int al_ids_take(const char *dir, const char *run_id, struct al_id_slot *s, struct al_error *err);

/* Give the slot back. gone: nothing of the run is left that could hold an
 * id of the range (its sandbox's processes were all reaped), and the file
 * is removed; otherwise it stays for al_ids_gc(). Safe on an empty s. */
void al_ids_release(struct al_id_slot *s, bool gone);

/* Remove the slots in dir (NULL: AL_IDS_DIR) whose run died and whose
 * range no process uses any more. Returns how many, or -errno. */
int al_ids_gc(const char *dir, struct al_error *err);

/* Hold slot while no run does (for gc of what a dead run left, keyed by
 * its ids): 1 with s locked, either the dead run's file (*made false) or a
 * file of ours linked to the free name (*made true), so that no run can
 * take the slot until al_ids_release(s, *made); 0 when a live run holds
 * it; -errno. */
int al_ids_hold(const char *dir, unsigned slot, struct al_id_slot *s, bool *made,
		struct al_error *err);
