/* What a microvm/vm guest boots from, made on the host by airlock:
 * - the kernel: a Debian linux-image package's own file (never any other
 *   file of /boot), with its modules directory;
 * - the initramfs: a newc cpio of the guest agent (as /init), the kernel
 *   modules the guest needs with their dependencies (from modules.dep),
 *   and, per run, the agent's config and the run's read-only inputs;
 * - the system image: a read-only ext4 file system of the host's own files
 *   of a set of Debian packages and everything they depend on (python3 and
 *   pandas by default), built once and cached.
 * Everything cached lives under AL_VM_CACHE_DIR, written atomically
 * (a temporary name, then rename), owned by root, mode 0644 files. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/error.h"

#define AL_VM_CACHE_DIR "/var/cache/airlock/vm"

struct al_vm_kernel {
	char *version; /* "6.1.0-57-cloud-amd64" */
	char *vmlinuz; /* "/boot/vmlinuz-6.1.0-57-cloud-amd64" */
	char *modules; /* "/lib/modules/6.1.0-57-cloud-amd64" */
	char *package; /* "linux-image-6.1.0-57-cloud-amd64" */
};

/* The newest installed kernel of a flavour ("cloud-amd64" for microvm,
 * "amd64" for vm) whose vmlinuz is listed in its package's dpkg file list
 * and whose modules directory exists. 1 found; 0 none, with why (one line
 * naming the package to install). */
int al_vm_kernel_find(const char *flavour, struct al_vm_kernel *k, char *why, size_t len);
void al_vm_kernel_free(struct al_vm_kernel *k);

/* A newc cpio archive being written to fd. Entries are written in the
 * order given; parents before children. */
struct al_cpio;
struct al_cpio *al_cpio_new(int fd);
int al_cpio_dir(struct al_cpio *c, const char *path, mode_t mode);
int al_cpio_file(struct al_cpio *c, const char *path, mode_t mode, const void *data, size_t len);
/* A host file (opened O_NOFOLLOW, copied in chunks) of at most max bytes
 * as it is now (-EFBIG past them: it may have grown since a caller's
 * look). */
int al_cpio_host_file(struct al_cpio *c, const char *path, mode_t mode, int host_fd, uint64_t max);
/* A host tree, walked without following links: directories, regular
 * files and symbolic links only (anything else refused); at most
 * max_bytes of file data and max_files entries (-EFBIG past them). */
int al_cpio_host_tree(struct al_cpio *c, const char *path, int host_dirfd, uint64_t max_bytes,
		      uint64_t max_files, struct al_error *err);
/* The file bytes (and link targets) of the last host tree written. */
uint64_t al_cpio_tree_bytes(const struct al_cpio *c);
/* The trailer; frees c. Returns 0 or -errno (of any write before). */
int al_cpio_finish(struct al_cpio *c);

/* The base initramfs for kernel k: the agent at /init, the named modules
 * and their dependencies under AL_GUEST_MODULES_DIR. Cached under
 * AL_VM_CACHE_DIR by kernel version, agent and module list; path_out
 * receives the file's path, mods_out (malloc'd array of malloc'd paths in
 * the initramfs, load order, *n_mods_out) what the config must load. */
int al_vm_initramfs(const struct al_vm_kernel *k, const char *agent, const char *const *modules,
		    char *path_out, size_t len, char ***mods_out, size_t *n_mods_out,
		    struct al_error *err);

/* The default packages of a system image (NULL-terminated): python3 with
 * pandas (the seed's demo), coreutils, bash, dash (/bin/sh) and libc-bin. */
extern const char *const al_vm_default_packages[];

/* The installed packages a system image of packages (NULL: the default
 * set) holds: those and their dependency closure through dpkg's status
 * (Depends and Pre-Depends; of "a | b" the first installed; virtual
 * packages through Provides; packages not installed skipped). names_out
 * and versions_out: NULL-terminated, malloc'd, sorted by name. -ENOENT
 * when a named package is not installed. */
int al_vm_package_closure(const char *const *packages, char ***names_out, char ***versions_out,
			  struct al_error *err);

/* The system image of packages (NULL: the default set) and their
 * dependencies, from the host's installed files. Built once (under a lock)
 * and cached under AL_VM_CACHE_DIR by the packages' names and versions. */
int al_vm_system_image(const char *const *packages, char *path_out, size_t len,
		       struct al_error *err);

/* `airlock gc`: remove the cached files (initramfs and system images) that
 * no run has read and nothing has changed for AL_VM_CACHE_UNUSED_DAYS
 * (their atime and mtime: a run reads its cached files at every start),
 * and builders' temporary files a day old; under the cache's lock. How
 * many, or -errno. A run that starts at that very moment with a file
 * unused for that long can fail once naming it; its next run builds it
 * again. */
#define AL_VM_CACHE_UNUSED_DAYS 7
int al_vm_cache_gc(struct al_error *err);
