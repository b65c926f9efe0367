/* The host id pool (slots.h).
 *
 * Why a lock file and a link: a run must never be seen holding a slot it
 * has not locked, or gc could take the slot from under it. So the file is
 * made without a name (O_TMPFILE; where the filesystem cannot, under a
 * temporary one), locked and filled there, and only then linked to its
 * slot's name (link fails with EEXIST when the slot is
 * taken, which makes the choice atomic). Only a holder of the lock
 * unlinks a slot's name: the run itself at its end, or gc after taking
 * the lock of a dead run's file and checking that the name still refers
 * to that file. */
#include "ids/slots.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "core/util.h"

#define TMP_PREFIX ".new-"

bool al_ids_in_pool(unsigned long long base)
{
	unsigned long long lo = AL_IDS_POOL_BASE;
	unsigned long long hi = lo + (unsigned long long)AL_IDS_POOL_SLOTS * AL_IDS_SLOT_SIZE;

	return base + AL_IDS_SLOT_SIZE > lo && base < hi;
}

static int open_dir(const char *dir, struct al_error *err)
{
	struct open_how how = {.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
			       .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
	struct stat st;
	int fd;

	fd = al_sys_openat2(AT_FDCWD, dir ? dir : AL_IDS_DIR, &how, sizeof(how));
	if (fd < 0 && errno == ENOENT && !dir) {
		/* The first run as root here: make the pool's directory. */
		if (mkdir("/run/airlock", 0755) < 0 && errno != EEXIST)
			return al_error_setsys(err, errno,
					       "host id slots: cannot create /run/airlock");
		if (mkdir(AL_IDS_DIR, 0700) < 0 && errno != EEXIST)
			return al_error_setsys(err, errno, "host id slots: cannot create %s",
					       AL_IDS_DIR);
		fd = al_sys_openat2(AT_FDCWD, AL_IDS_DIR, &how, sizeof(how));
	}
	dir = dir ? dir : AL_IDS_DIR;
	if (fd < 0)
		return al_error_setsys(err, errno, "host id slots: opening %s", dir);
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return al_error_setsys(err, e, "host id slots: stat %s", dir);
	}
	if (st.st_uid != geteuid() || (st.st_mode & 022)) {
		close(fd);
		return al_error_set(err, EPERM,
				    "host id slots: %s (owner %u, mode %04o) must belong to uid %u "
				    "and be writable by no one else",
				    dir, (unsigned)st.st_uid, st.st_mode & 07777,
				    (unsigned)geteuid());
	}
	return fd;
}

/* Try to take fd's lock without waiting: 1 taken, 0 held by another, or
 * -errno. */
static int try_lock(int fd)
{
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};

	if (fcntl(fd, F_OFD_SETLK, &fl) == 0)
		return 1;
	return errno == EAGAIN || errno == EACCES ? 0 : -errno;
}

static bool parse_slot(const char *name, unsigned *slot)
{
	unsigned long v = 0;

	if (!isdigit((unsigned char)name[0]) || (name[0] == '0' && name[1]))
		return false;
	for (const char *c = name; *c; c++) {
		if (!isdigit((unsigned char)*c) || c - name > 5)
			return false;
		v = v * 10 + (unsigned long)(*c - '0');
	}
	if (v >= AL_IDS_POOL_SLOTS)
		return false;
	*slot = (unsigned)v;
	return true;
}

/* The ids on a "Uid:" or "Gid:" line of a status file into v[4]. */
static bool status_ids(const char *status, const char *key, unsigned long *v)
{
	const char *p = strstr(status, key);

	return p && sscanf(p + strlen(key), "%lu %lu %lu %lu", &v[0], &v[1], &v[2], &v[3]) == 4;
}

/* Call f for every uid and gid of every process on the host; stops when f
 * returns true (and returns true). Unreadable /proc: true (cannot tell). */
static bool each_process_id(bool (*f)(unsigned long id, void *arg), void *arg)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	bool stop = false;

	if (!d)
		return true;
	while (!stop && (e = readdir(d))) {
		char path[64], buf[4096];
		unsigned long v[8];
		if (!isdigit((unsigned char)e->d_name[0]))
			continue;
		snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
		if (al_read_file(path, buf, sizeof(buf)) <= 0)
			continue; /* gone since readdir */
		if (!status_ids(buf, "\nUid:", v) || !status_ids(buf, "\nGid:", v + 4))
			continue;
		for (int i = 0; i < 8 && !stop; i++)
			stop = f(v[i], arg);
	}
	closedir(d);
	return stop;
}

/* used[slot] for every slot whose ids a process has: one pass over /proc
 * for all the dead runs' files gc finds. */
static bool mark_slot(unsigned long id, void *arg)
{
	bool *used = arg;
	if (id >= AL_IDS_POOL_BASE &&
	    (id - AL_IDS_POOL_BASE) / AL_IDS_SLOT_SIZE < AL_IDS_POOL_SLOTS)
		used[(id - AL_IDS_POOL_BASE) / AL_IDS_SLOT_SIZE] = true;
	return false;
}

struct gc {
	bool scanned;
	bool unknown; /* /proc could not be read: keep every slot */
	bool used[AL_IDS_POOL_SLOTS];
};

static bool slot_in_use(struct gc *g, unsigned slot)
{
	if (!g->scanned) {
		g->unknown = each_process_id(mark_slot, g->used);
		g->scanned = true;
	}
	return g->unknown || g->used[slot];
}

/* name in dirfd, when its lock is free and it is still that file: removed
 * (slot files only when no process uses their range). 1 removed, 0 not. */
static int reclaim(int dirfd, const char *name, struct gc *g, bool slot_file, unsigned slot)
{
	_cleanup_close_ int fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	struct stat a, b;
	char owner[128] = "";

	if (fd < 0 || try_lock(fd) != 1)
		return 0;
	if (fstat(fd, &a) < 0 || fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
	    a.st_dev != b.st_dev || a.st_ino != b.st_ino)
		return 0; /* released and replaced since we opened it */
	if (slot_file && slot_in_use(g, slot)) {
		ssize_t n = pread(fd, owner, sizeof(owner) - 1, 0);
		owner[n > 0 ? n : 0] = '\0';
		owner[strcspn(owner, "\n")] = '\0';
		al_warn("host id slot %u (%s): its run is gone but processes still have ids "
			"%u..%u; left in place",
			slot, owner[0] ? owner : "no owner recorded", al_ids_slot_base(slot),
			al_ids_slot_base(slot) + AL_IDS_SLOT_SIZE - 1);
		return 0;
	}
	if (unlinkat(dirfd, name, 0) < 0)
		return 0;
	if (slot_file)
		al_debug("gc: reclaimed host id slot %u", slot);
	return slot_file ? 1 : 0;
}

/* A temporary file's taker (".new-PID-RUN") is still there: it may be
 * between creating the file and locking it, so it is not gc's to take. */
static bool taker_alive(const char *name)
{
	int pid = atoi(name + strlen(TMP_PREFIX));
	return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

static int gc_at(int dirfd, struct al_error *err)
{
	int dup = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	DIR *d;
	struct dirent *e;
	_cleanup_free_ struct gc *g = NULL;
	int n = 0;

	if (dup < 0)
		return al_error_setsys(err, errno, "host id slots: dup");
	g = xcalloc(1, sizeof(*g));
	d = fdopendir(dup);
	if (!d) {
		int r = al_error_setsys(err, errno, "host id slots: reading the directory");
		close(dup);
		return r;
	}
	while ((e = readdir(d))) {
		unsigned slot;
		if (parse_slot(e->d_name, &slot))
			n += reclaim(dirfd, e->d_name, g, true, slot);
		else if (strncmp(e->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 &&
			 !taker_alive(e->d_name))
			reclaim(dirfd, e->d_name, g, false, 0);
	}
	closedir(d);
	return n;
}

int al_ids_gc(const char *dir, struct al_error *err)
{
	_cleanup_close_ int dirfd = -1;
	struct stat st;

	/* No pool yet (no run as root here so far): nothing to collect. */
	if (!dir && stat(AL_IDS_DIR, &st) < 0 && errno == ENOENT)
		return 0;
	dirfd = open_dir(dir, err);
	if (dirfd < 0)
		return dirfd;
	return gc_at(dirfd, err);
}

static unsigned random_slot(void)
{
	unsigned r;

	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
		r = (unsigned)getpid() * 2654435761u ^ (unsigned)al_now_ms();
	return r % AL_IDS_POOL_SLOTS;
}

/* Slots that overlap a range /etc/subuid or /etc/subgid hands out
 * ("NAME:FIRST:COUNT"): another container manager's ids, never a run's. */
static void mark_subids(bool *skip)
{
	static const char *const files[] = {"/etc/subuid", "/etc/subgid"};
	const unsigned long long lo = AL_IDS_POOL_BASE,
				 hi = lo + (unsigned long long)AL_IDS_POOL_SLOTS * AL_IDS_SLOT_SIZE;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		_cleanup_fclose_ FILE *f = fopen(files[i], "re");
		char line[512];
		while (f && fgets(line, sizeof(line), f)) {
			unsigned long long first, count;
			const char *c = strchr(line, ':');
			if (!c || sscanf(c + 1, "%llu:%llu", &first, &count) != 2 || count == 0 ||
			    first >= hi || first + count <= lo)
				continue;
			unsigned long long a = first < lo ? 0 : (first - lo) / AL_IDS_SLOT_SIZE;
			unsigned long long b = first + count >= hi
						   ? AL_IDS_POOL_SLOTS - 1
						   : (first + count - 1 - lo) / AL_IDS_SLOT_SIZE;
			for (unsigned long long k = a; k <= b; k++)
				skip[k] = true;
		}
	}
}

/* Link the locked file (fd, named tmp, or without a name when tmp is
 * NULL) to the first free slot's name from a random start, passing slots
 * /etc/subuid or /etc/subgid hand out. The slot, or -1 when all are
 * taken, or -errno. */
static int link_free_slot(int dirfd, int fd, const char *tmp, unsigned *n_skipped)
{
	unsigned start = random_slot();
	bool skip[AL_IDS_POOL_SLOTS] = {false};
	char self[32];

	mark_subids(skip);
	*n_skipped = 0;
	for (unsigned i = 0; i < AL_IDS_POOL_SLOTS; i++)
		*n_skipped += skip[i];
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	for (unsigned i = 0; i < AL_IDS_POOL_SLOTS; i++) {
		unsigned slot = (start + i) % AL_IDS_POOL_SLOTS;
		char name[16];
		if (skip[slot])
			continue;
		snprintf(name, sizeof(name), "%u", slot);
		int r = tmp ? linkat(dirfd, tmp, dirfd, name, 0)
			    : linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW);
		if (r == 0)
			return (int)slot;
		if (errno != EEXIST)
			return -errno;
	}
	return -1;
}

/* The slot's file, not yet linked: an unnamed one (O_TMPFILE) where the
 * filesystem makes them, else one named tmp (*named set), created
 * exclusively (a dead taker's of the same name is reclaimed first). */
static int new_file(int dirfd, const char *tmp, bool *named)
{
	int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	*named = false;
	if (fd >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return fd;
	*named = true;
	fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && reclaim(dirfd, tmp, NULL, false, 0) == 0 &&
	    faccessat(dirfd, tmp, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
		fd = openat(dirfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	return fd;
}

int al_ids_take(const char *dir, const char *run_id, struct al_id_slot *s, struct al_error *err)
{
	_cleanup_close_ int dirfd = -1, fd = -1;
	unsigned long long start = 0;
	char tmp[96], owner[128];
	bool named;
	unsigned skipped = 0;
	int slot, r, len;

	*s = (struct al_id_slot)AL_ID_SLOT_NONE;
	dirfd = open_dir(dir, err);
	if (dirfd < 0)
		return dirfd;
	snprintf(tmp, sizeof(tmp), TMP_PREFIX "%d-%s", (int)getpid(), run_id ? run_id : "run");
	fd = new_file(dirfd, tmp, &named);
	if (fd < 0)
		return al_error_setsys(err, errno,
				       "host id slots: creating a slot's file in the pool");
	if ((r = try_lock(fd)) != 1) {
		if (named)
			unlinkat(dirfd, tmp, 0);
		return al_error_setsys(err, r < 0 ? -r : EAGAIN, "host id slots: locking %s", tmp);
	}
	al_proc_starttime(getpid(), &start);
	len = snprintf(owner, sizeof(owner), "%d %llu %s\n", (int)getpid(), start,
		       run_id ? run_id : "-");
	if (al_write_all(fd, owner, (size_t)len) < 0) {
		r = al_error_setsys(err, errno, "host id slots: writing %s", tmp);
		if (named)
			unlinkat(dirfd, tmp, 0);
		return r;
	}
	slot = link_free_slot(dirfd, fd, named ? tmp : NULL, &skipped);
	if (slot == -1) {
		/* Every slot taken: some may be dead runs' (a crashed
		 * supervisor's, left for gc). */
		struct al_error gc_err = {0};
		if (gc_at(dirfd, &gc_err) > 0)
			slot = link_free_slot(dirfd, fd, named ? tmp : NULL, &skipped);
	}
	if (named)
		unlinkat(dirfd, tmp, 0);
	if (slot == -1)
		return al_error_set(
		    err, EUSERS,
		    "host id slots: none of the pool's %u slots is free: %u are held "
		    "by live runs (each run as root gets host ids of its own), %u "
		    "overlap ranges /etc/subuid or /etc/subgid hands out",
		    AL_IDS_POOL_SLOTS, AL_IDS_POOL_SLOTS - skipped, skipped);
	if (slot < 0)
		return al_error_setsys(err, -slot, "host id slots: linking a slot");
	s->fd = TAKE_FD(fd);
	s->dirfd = TAKE_FD(dirfd);
	s->slot = slot;
	return 0;
}

void al_ids_release(struct al_id_slot *s, bool gone)
{
	if (s->fd >= 0 && gone) {
		char name[16];
		struct stat a, b;
		snprintf(name, sizeof(name), "%d", s->slot);
		/* Only a holder of the lock unlinks a slot's name, and only while
		 * the name is still its own file (not one that replaced it after
		 * someone else removed it). */
		if (fstat(s->fd, &a) < 0 || fstatat(s->dirfd, name, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
		    a.st_dev != b.st_dev || a.st_ino != b.st_ino)
			al_warn("host id slot %d: its file is no longer ours; left alone", s->slot);
		else if (unlinkat(s->dirfd, name, 0) < 0)
			al_warn("host id slot %d: removing it: %s", s->slot, strerror(errno));
	}
	al_closep(&s->fd);
	al_closep(&s->dirfd);
	s->slot = -1;
}

int al_ids_hold(const char *dir, unsigned slot, struct al_id_slot *s, bool *made,
		struct al_error *err)
{
	_cleanup_close_ int dirfd = -1, fd = -1;
	char name[16], self[32];
	struct stat a, b;
	int r;

	*s = (struct al_id_slot)AL_ID_SLOT_NONE;
	*made = false;
	if (slot >= AL_IDS_POOL_SLOTS)
		return al_error_set(err, EINVAL, "host id slot %u: not in the pool", slot);
	dirfd = open_dir(dir, err);
	if (dirfd < 0)
		return dirfd;
	snprintf(name, sizeof(name), "%u", slot);
	fd = openat(dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd >= 0) {
		/* A dead run's file: ours while we hold its lock, as long as
		 * the name still refers to it. */
		if ((r = try_lock(fd)) != 1)
			return r;
		if (fstat(fd, &a) < 0 || fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
		    a.st_dev != b.st_dev || a.st_ino != b.st_ino)
			return 0;
		/* Processes of the dead run still have its ids: not yet. */
		_cleanup_free_ struct gc *g = xcalloc(1, sizeof(*g));
		if (slot_in_use(g, slot))
			return 0;
	} else {
		if (errno != ENOENT)
			return al_error_setsys(err, errno, "host id slot %u", slot);
		/* No file: a locked one of ours takes the name, as a run's
		 * would (link fails when a run took it meanwhile). */
		fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
		if (fd < 0 || (r = try_lock(fd)) != 1)
			return fd < 0 ? al_error_setsys(err, errno, "host id slot %u", slot) : 0;
		snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
		if (linkat(AT_FDCWD, self, dirfd, name, AT_SYMLINK_FOLLOW) < 0)
			return errno == EEXIST
				   ? 0
				   : al_error_setsys(err, errno, "host id slot %u", slot);
		*made = true;
	}
	s->fd = TAKE_FD(fd);
	s->dirfd = TAKE_FD(dirfd);
	s->slot = (int)slot;
	return 1;
}
