#include "supervisor/confine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/sys.h"

/* Threads other than the caller would stay outside the domain. */
static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -errno;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static int add_fd(int ruleset, int fd, const char *path, uint64_t access, struct al_error *err)
{
	struct landlock_path_beneath_attr pb = {.allowed_access = access, .parent_fd = fd};

	if (al_sys_landlock_add_rule(ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0) < 0)
		return al_error_setsys(err, errno, "confining the supervisor: landlock rule for %s",
				       path);
	return 0;
}

static int add_path(int ruleset, const char *path, bool dir, uint64_t access, struct al_error *err)
{
	int fd = open(path, O_PATH | O_CLOEXEC | (dir ? O_DIRECTORY : 0)), r;

	if (fd < 0)
		return al_error_setsys(err, errno, "confining the supervisor: %s", path);
	r = add_fd(ruleset, fd, path, access, err);
	close(fd);
	return r;
}

static bool have_caps(void)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2] = {{0}};

	return syscall(SYS_capget, &hdr, data) == 0 && (data[0].permitted | data[1].permitted);
}

/* Only exec uses the bounding set, and the supervisor execs nothing, so it
 * can go early. */
static int drop_bounding(struct al_error *err)
{
	for (int cap = 0; cap < 64; cap++) {
		if (AL_CONFINE_KEPT_CAPS & (1ULL << cap))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; /* past the last capability this kernel knows */
			return al_error_setsys(
			    err, errno, "confining the supervisor: dropping capability %d", cap);
		}
	}
	return 0;
}

static int drop_caps(struct al_error *err)
{
	struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
	struct __user_cap_data_struct data[2] = {{0}};
	const uint32_t keep = (uint32_t)AL_CONFINE_KEPT_CAPS;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return al_error_setsys(err, errno, "confining the supervisor: capget");
	if (!(data[0].permitted | data[1].permitted))
		return 0; /* rootless: nothing to give up */
	data[0].effective &= keep;
	data[0].permitted &= keep;
	data[0].inheritable = 0;
	data[1].effective = data[1].permitted = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return al_error_setsys(err, errno, "confining the supervisor: capset");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return al_error_setsys(err, errno,
				       "confining the supervisor: ambient capabilities");
	return 0;
}

int al_confine_prepare(const struct al_confine *c, int *ret_ruleset, struct al_error *err)
{
	const uint64_t all = al_landlock_fs_all(c->landlock_abi);
	const uint64_t trunc = c->landlock_abi >= 3 ? LANDLOCK_ACCESS_FS_TRUNCATE : 0;
	struct al_landlock_attr attr = {.handled_access_fs = all};
	int n = count_threads(), r = 0;

	*ret_ruleset = -1;
	if (n != 1)
		return al_error_set(err, n < 0 ? -n : EBUSY,
				    "confining the supervisor: %d threads, expected 1", n);
	if (have_caps() && (r = drop_bounding(err)) < 0)
		return r;
	if (c->landlock_abi <= 0)
		return 0;
	/* No TCP bind (the gateway only connects); connect stays open, as
	 * the gateway's decisions are the policy there. No abstract unix
	 * sockets outside the domain. Signals stay allowed: stopping the
	 * sandbox is the supervisor's job. */
	if (c->landlock_abi >= 4)
		attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP;
	if (c->landlock_abi >= 6)
		attr.scoped = LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
	_cleanup_close_ int ruleset =
	    al_sys_landlock_create_ruleset(&attr, al_landlock_attr_size(c->landlock_abi), 0);
	if (ruleset < 0)
		return al_error_setsys(err, errno, "confining the supervisor: landlock ruleset");
	for (size_t i = 0; i < c->n_run_dirs && r == 0; i++)
		r = add_path(ruleset, c->run_dirs[i], true,
			     (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
			      LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR |
			      (c->make_run_dirs ? LANDLOCK_ACCESS_FS_MAKE_DIR : 0) | trunc) &
				 all,
			     err);
	for (size_t i = 0; i < c->n_write_fds && r == 0; i++)
		r = add_fd(ruleset, c->write_fds[i], "a --copy-out directory",
			   (LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_DIR |
			    LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_FILE |
			    LANDLOCK_ACCESS_FS_READ_DIR | trunc) &
			       all,
			   err);
	if (c->make_run_dirs && r == 0)
		r = add_path(ruleset, "/proc/self/fdinfo", true,
			     (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR) & all,
			     err);
	for (size_t i = 0; i < c->n_parent_dirs && r == 0; i++)
		r = add_path(ruleset, c->parent_dirs[i], true, LANDLOCK_ACCESS_FS_REMOVE_DIR, err);
	for (size_t i = 0; i < c->n_read_files && r == 0; i++)
		if (access(c->read_files[i], F_OK) == 0) /* absent: nothing to read */
			r = add_path(ruleset, c->read_files[i], false, LANDLOCK_ACCESS_FS_READ_FILE,
				     err);
#ifdef __SANITIZE_ADDRESS__
	/* LeakSanitizer reads /proc/self at exit; only sanitizer builds
	 * (tests) give the supervisor that. */
	if (r == 0)
		r = add_path(ruleset, "/proc/self", true,
			     LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR, err);
#endif
	if (r == 0 && c->out_dirfd >= 0)
		r = add_fd(ruleset, c->out_dirfd, "the result's directory",
			   LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_WRITE_FILE |
			       LANDLOCK_ACCESS_FS_REMOVE_FILE | trunc,
			   err);
	if (r == 0 && c->remove_dirfd >= 0)
		r = add_fd(ruleset, c->remove_dirfd, "the backend's directory",
			   LANDLOCK_ACCESS_FS_REMOVE_FILE |
			       (c->remove_tree
				    ? LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_READ_DIR
				    : 0),
			   err);
	if (r == 0 && c->slot_dirfd >= 0)
		r = add_fd(ruleset, c->slot_dirfd, "the host id slots' directory",
			   LANDLOCK_ACCESS_FS_REMOVE_FILE, err);
	if (r == 0)
		*ret_ruleset = TAKE_FD(ruleset);
	return r;
}

int al_confine_allow_read(int ruleset, int fd, struct al_error *err)
{
	return add_fd(ruleset, fd, "the scratch",
		      LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR, err);
}

int al_confine_self(int ruleset, struct al_error *err)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return al_error_setsys(err, errno, "confining the supervisor: no_new_privs");
	if (ruleset >= 0 && al_sys_landlock_restrict_self(ruleset, 0) < 0)
		return al_error_setsys(err, errno,
				       "confining the supervisor: landlock_restrict_self");
	return drop_caps(err);
}
