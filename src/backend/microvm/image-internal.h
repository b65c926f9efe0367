/* What image.c, kernel.c, cpio.c and sysimage.c share, and the seams the
 * unit tests use: the same functions with the cache directory as an
 * argument (the public ones pass AL_VM_CACHE_DIR). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "backend/microvm/image.h"
#include "core/error.h"

/* Bumped when what a cached file holds changes for the same inputs, so
 * that an older airlock's file is not taken for a newer one's. */
#define AL_VM_IMAGE_FORMAT "3"

/* Create dir (and its parents) as root-owned 0755 directories where
 * missing; an existing one must be a directory. */
int al_vm_cache_mkdir(const char *dir, struct al_error *err);

/* The cache's lock (.lock in dirfd, the directory cache_dir), taken
 * exclusively: the descriptor that holds it, or -errno. */
int al_vm_cache_lock(int dirfd, const char *cache_dir, struct al_error *err);

/* Whether name in dirfd may be used as a cached file: a regular file (not
 * followed if a link) owned by root and not writable by group or others. */
bool al_vm_cache_usable(int dirfd, const char *name);

/* Lower-case hex of a SHA-256 (65 bytes with the NUL). */
void al_vm_sha256_hex(const unsigned char md[32], char out[65]);

/* Debian's version order (dpkg --compare-versions): <0, 0 or >0. */
int al_vm_version_cmp(const char *a, const char *b);

/* The modules to load for names (each resolved through dir/modules.dep,
 * its dependencies first, each once): paths relative to dir, in load
 * order, as a NULL-terminated malloc'd vector. */
int al_vm_module_closure(const char *dir, const char *const *names, char ***paths_out,
			 struct al_error *err);

/* al_vm_initramfs and al_vm_system_image with the cache in cache_dir. */
int al_vm_initramfs_in(const char *cache_dir, const struct al_vm_kernel *k, const char *agent,
		       const char *const *modules, char *path_out, size_t len, char ***mods_out,
		       size_t *n_mods_out, struct al_error *err);
int al_vm_system_image_in(const char *cache_dir, const char *const *packages, char *path_out,
			  size_t len, struct al_error *err);

/* mkfs.ext4 -d src into image (a file of size bytes, made or extended;
 * inodes of them; the root directory uid:gid's); mkfs's output kept for
 * the message when it fails. src_fd >= 0: the tree is that directory
 * instead, alone (no mount below it), bound read-only at src (an empty
 * directory) with no link followed, in a mount namespace of mkfs's own;
 * timeout_s > 0: mkfs killed past it (ETIMEDOUT). */
int al_vm_mkfs(const char *src, const char *image, uint64_t size, uint64_t inodes,
	       const char *label, uid_t uid, gid_t gid, int src_fd, unsigned timeout_s,
	       struct al_error *err);

/* al_vm_cache_gc with the cache in cache_dir and the time now. */
int al_vm_cache_gc_in(const char *cache_dir, time_t now, struct al_error *err);
