/* The state directory of the OCI runtime's containers (state.h). */
#include "oci/state.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

void al_oci_state_clear(struct al_oci_state *st)
{
	free(st->id);
	free(st->bundle);
	free(st->created);
	free(st->oci_version);
	free(st->record);
	free(st->cgroup_path);
	json_decref(st->annotations);
	*st = (struct al_oci_state){0};
}

int al_oci_id_check(const char *id, struct al_error *err)
{
	size_t n = strlen(id);

	if (n == 0)
		return al_error_set(err, EINVAL, "the container id is empty");
	if (n > AL_OCI_ID_MAX)
		return al_error_set(err, EINVAL, "the container id is over %d bytes",
				    AL_OCI_ID_MAX);
	if (strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return al_error_set(err, EINVAL, "invalid container id \"%s\"", id);
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || strchr("_+-.", *c)))
			return al_error_set(err, EINVAL,
					    "invalid container id \"%.64s\": only letters, digits "
					    "and _ + - . may be in it",
					    id);
	return 0;
}

int al_oci_root_open(const char *root, int *ret, struct al_error *err)
{
	char path[4096];
	struct stat st;

	if (root[0] != '/')
		return al_error_set(err, EINVAL, "--root %s: not an absolute path", root);
	if (strlen(root) >= sizeof(path))
		return al_error_set(err, ENAMETOOLONG, "--root: too long");
	snprintf(path, sizeof(path), "%s", root);
	for (char *c = path + 1;; c++) {
		if (*c != '/' && *c != '\0')
			continue;
		char saved = *c;
		*c = '\0';
		if (mkdir(path, 0700) < 0 && errno != EEXIST)
			return al_error_setsys(err, errno, "--root: mkdir %s", path);
		*c = saved;
		if (!saved)
			break;
	}
	int fd = open(root, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return al_error_setsys(err, errno, "--root %s", root);
	if (fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return al_error_set(err, EPERM,
				    "--root %s must be a directory of uid %u that no one else may "
				    "write",
				    root, (unsigned)geteuid());
	}
	*ret = fd;
	return 0;
}

int al_oci_dir_make(int rootfd, const char *id, int *ret, struct al_error *err)
{
	if (mkdirat(rootfd, id, 0700) < 0) {
		if (errno == EEXIST)
			return al_error_set(err, EEXIST, "container %s already exists", id);
		return al_error_setsys(err, errno, "making the state directory of %s", id);
	}
	return al_oci_dir_open(rootfd, id, ret, err);
}

int al_oci_dir_open(int rootfd, const char *id, int *ret, struct al_error *err)
{
	int fd = openat(rootfd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0 && errno == ENOENT)
		return al_error_set(err, ENOENT, "container %s does not exist", id);
	if (fd < 0)
		return al_error_setsys(err, errno, "the state directory of %s", id);
	*ret = fd;
	return 0;
}

int al_oci_json_write(int dirfd, const char *name, json_t *o, struct al_error *err)
{
	char tmp[64];
	_cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);

	snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
	if (!text)
		return al_error_set(err, ENOMEM, "writing %s", name);
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return al_error_setsys(err, errno, "writing %s", name);
	int r = al_write_all(fd, text, strlen(text));
	int e = -r;
	if (close(fd) < 0 && r == 0) {
		r = -1;
		e = errno;
	}
	if (r < 0 || renameat(dirfd, tmp, dirfd, name) < 0) {
		if (r == 0)
			e = errno;
		unlinkat(dirfd, tmp, 0);
		return al_error_setsys(err, e, "writing %s", name);
	}
	return 0;
}

json_t *al_oci_json_read(int dirfd, const char *name)
{
	char buf[256 << 10];
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	ssize_t n = 0, k;
	while ((size_t)n < sizeof(buf) && (k = read(fd, buf + n, sizeof(buf) - (size_t)n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			n = -1;
			break;
		}
		n += k;
	}
	close(fd);
	if (n <= 0 || (size_t)n >= sizeof(buf))
		return NULL;
	json_t *o = json_loadb(buf, (size_t)n, 0, NULL);
	if (o && !json_is_object(o)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int al_oci_state_write(int dirfd, const struct al_oci_state *st, struct al_error *err)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:o}", "id", st->id, "bundle", st->bundle,
		      "created", st->created, "ociVersion", st->oci_version, "pid", (int)st->pid,
		      "start_time", (json_int_t)st->start_time, "annotations",
		      st->annotations ? json_incref(st->annotations) : json_object());
	if (o && st->record)
		json_object_set_new(o, "record", json_string(st->record));
	if (o && st->cgroup_path)
		json_object_set_new(o, "cgroupsPath", json_string(st->cgroup_path));
	int r = o ? al_oci_json_write(dirfd, "state.json", o, err)
		  : al_error_set(err, ENOMEM, "writing state.json");
	json_decref(o);
	return r;
}

int al_oci_state_read(int dirfd, struct al_oci_state *st, struct al_error *err)
{
	json_t *o = al_oci_json_read(dirfd, "state.json"), *ann = NULL;
	const char *id = NULL, *bundle = NULL, *created = NULL, *ver = NULL;
	int pid = 0;
	json_int_t start = 0;

	*st = (struct al_oci_state){0};
	if (!o) {
		if (faccessat(dirfd, "state.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
		    errno == ENOENT)
			return -ENOENT;
		return al_error_set(err, EIO, "state.json cannot be read");
	}
	if (json_unpack(o, "{s:s, s:s, s:s, s:s, s:i, s:I, s:o}", "id", &id, "bundle", &bundle,
			"created", &created, "ociVersion", &ver, "pid", &pid, "start_time", &start,
			"annotations", &ann) < 0 ||
	    pid <= 0 || start < 0 || !json_is_object(ann)) {
		json_decref(o);
		return al_error_set(err, EIO, "state.json is not airlock's");
	}
	st->id = xstrdup(id);
	st->bundle = xstrdup(bundle);
	st->created = xstrdup(created);
	st->oci_version = xstrdup(ver);
	st->pid = pid;
	st->start_time = (unsigned long long)start;
	st->annotations = json_incref(ann);
	const char *rec = json_string_value(json_object_get(o, "record"));
	st->record = rec && rec[0] == '/' ? xstrdup(rec) : NULL;
	/* Checked again: the cleanup of a dead supervisor removes it. */
	const char *cgp = json_string_value(json_object_get(o, "cgroupsPath"));
	if (cgp && al_cgroup_path_check(cgp, &st->cgroup_path, NULL) < 0) {
		json_decref(o);
		al_oci_state_clear(st);
		return al_error_set(err, EIO, "state.json: cgroupsPath is not airlock's");
	}
	json_decref(o);
	return 0;
}

int al_oci_dir_remove(int rootfd, const char *id, struct al_error *err)
{
	/* A supervisor that is ending (its create died before the commit, so
	 * `delete` does not wait for it) may still write its result.json
	 * while the directory is emptied: empty it again, a few times, for
	 * about a second. Once the directory is gone its writes fail. */
	for (int tries = 0;; tries++) {
		int fd = openat(rootfd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
		struct dirent *de;

		if (!d) {
			if (fd >= 0)
				close(fd);
			if (errno == ENOENT)
				return 0;
			return al_error_setsys(err, errno, "removing the state directory of %s",
					       id);
		}
		while ((de = readdir(d)))
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				unlinkat(dirfd(d), de->d_name, 0);
		closedir(d);
		if (unlinkat(rootfd, id, AT_REMOVEDIR) == 0 || errno == ENOENT)
			return 0;
		if (errno != ENOTEMPTY || tries >= 50)
			return al_error_setsys(err, errno, "removing the state directory of %s",
					       id);
		usleep(20000);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

char **al_oci_ids(int rootfd)
{
	int fd = openat(rootfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	char **ids = NULL;
	struct dirent *de;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((de = readdir(d)))
		if (de->d_name[0] != '.' && al_oci_id_check(de->d_name, NULL) == 0)
			al_strv_push(&ids, de->d_name);
	closedir(d);
	if (ids)
		qsort(ids, al_strv_len(ids), sizeof(*ids), cmp_str);
	return ids;
}

unsigned long long al_oci_start_time(pid_t pid)
{
	unsigned long long t = 0;

	return al_proc_starttime(pid, &t) == 0 ? t : 0;
}

bool al_oci_alive(const struct al_oci_state *st)
{
	return st->pid > 0 && al_oci_start_time(st->pid) == st->start_time;
}

void al_oci_dir_path(int dirfd, const char *name, char *buf, size_t len)
{
	snprintf(buf, len, "/proc/self/fd/%d/%s", dirfd, name);
}
