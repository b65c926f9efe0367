/* The monitor's listening sockets and the bearer tokens of its TCP
 * listener. */
#include "serve/internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/util.h"

#define TOKEN_FILE_MAX 65536
#define TOKEN_MIN      16
/* sd_listen_fds(3): the first descriptor systemd passes. */
#define AL_LISTEN_FDS_START 3

int al_serve_listen_unix(const char *path, const char *group, struct al_error *err)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	gid_t gid = 0;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return al_error_set(err, ENAMETOOLONG, "--socket %s: longer than %zu bytes", path,
				    sizeof(sa.sun_path) - 1);
	if (group) {
		struct group *g = getgrnam(group);
		if (!g)
			return al_error_set(err, ENOENT, "--socket-group %s: no such group", group);
		gid = g->gr_gid;
	}
	/* A socket left by a daemon that died goes; anything else there is
	 * not ours to remove. */
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			return al_error_set(err, EEXIST, "--socket %s: exists and is not a socket",
					    path);
		if (unlink(path) < 0)
			return al_error_setsys(err, errno,
					       "--socket %s: cannot remove the old socket", path);
	}
	/* Bound in a directory of its own that only root may write (made
	 * 0700 beside the socket's path), given its group and mode there, then
	 * renamed into place: nothing swapped in under a writable directory
	 * is followed, and there is no moment where others may connect. */
	_cleanup_free_ char *tmpdir = xasprintf("%s.XXXXXX", path);
	if (!mkdtemp(tmpdir))
		return al_error_setsys(err, errno, "--socket %s: cannot make a directory beside it",
				       path);
	_cleanup_free_ char *tmp = xasprintf("%s/s", tmpdir);
	if (strlen(tmp) >= sizeof(sa.sun_path)) {
		rmdir(tmpdir);
		return al_error_set(err, ENAMETOOLONG, "--socket %s: too long to bind beside it",
				    path);
	}
	strcpy(sa.sun_path, tmp);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
		rmdir(tmpdir);
		return al_error_setsys(err, errno, "socket(AF_UNIX)");
	}
	mode_t old = umask(0177);
	int r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r == 0 && group &&
	    (fchownat(AT_FDCWD, tmp, (uid_t)-1, gid, AT_SYMLINK_NOFOLLOW) < 0 ||
	     fchmodat(AT_FDCWD, tmp, 0660, 0) < 0))
		r = -1;
	/* Listening before it is at its path: a client that finds the path
	 * can connect (no ECONNREFUSED between the rename and listen). */
	const char *what = group ? "cannot bind it and give it to its group" : "bind";
	if (r == 0 && listen(fd, 128) < 0) {
		r = -1;
		what = "listen";
	}
	if (r == 0)
		r = rename(tmp, path);
	if (r < 0) {
		r = errno;
		close(fd);
		unlink(tmp);
		rmdir(tmpdir);
		return al_error_setsys(err, r, "--socket %s: %s", path, what);
	}
	rmdir(tmpdir);
	return fd;
}

/* "127.0.0.1:PORT" or "[::1]:PORT" (any 127.0.0.0/8 address): loopback
 * only, since tokens travel in clear text. */
int al_serve_listen_tcp(const char *spec, struct al_error *err)
{
	struct sockaddr_storage ss = {0};
	socklen_t len;
	char host[64];
	const char *colon = strrchr(spec, ':');
	char *end;
	int fd, one = 1;

	if (!colon || colon == spec || (size_t)(colon - spec) >= sizeof(host))
		return al_error_set(err, EINVAL, "--listen %s: expected ADDRESS:PORT", spec);
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port == 0 || port > 65535)
		return al_error_set(err, EINVAL, "--listen %s: port \"%s\" is not 1-65535", spec,
				    colon + 1);
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	if (host[0] == '[' && host[strlen(host) - 1] == ']') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
		host[strlen(host) - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1 ||
		    !IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
			return al_error_set(
			    err, EINVAL,
			    "--listen %s: only a loopback address (127.0.0.0/8 or "
			    "[::1]) may be listened on: bearer tokens travel in clear",
			    spec);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		len = sizeof(*s6);
	} else {
		struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
		if (inet_pton(AF_INET, host, &s4->sin_addr) != 1 ||
		    (ntohl(s4->sin_addr.s_addr) >> 24) != 127)
			return al_error_set(
			    err, EINVAL,
			    "--listen %s: only a loopback address (127.0.0.0/8 or "
			    "[::1]) may be listened on: bearer tokens travel in clear",
			    spec);
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		len = sizeof(*s4);
	}
	if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
		return al_error_setsys(err, errno, "--listen %s: socket", spec);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 128) < 0) {
		int e = errno;
		close(fd);
		return al_error_setsys(err, e, "--listen %s", spec);
	}
	return fd;
}

static bool identity_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || strchr("._-@", *s)))
			return false;
	return true;
}

/* Each line "TOKEN IDENTITY"; blank lines and lines starting with '#'
 * are skipped. The file holds secrets: a regular file owned by airlock's
 * uid, readable by it only (as a JWT signing key must be). */
int al_serve_tokens_load(const char *path, struct al_token **ret, size_t *ret_n,
			 struct al_error *err)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	_cleanup_free_ char *buf = NULL;
	struct al_token *v = NULL;
	size_t n = 0, line = 0;
	struct stat st;
	ssize_t len;

	if (fd < 0)
		return al_error_setsys(err, errno, "--token-file %s: cannot open", path);
	if (fstat(fd, &st) < 0)
		return al_error_setsys(err, errno, "--token-file %s: fstat", path);
	if (!S_ISREG(st.st_mode))
		return al_error_set(err, EINVAL, "--token-file %s: not a regular file", path);
	if (st.st_uid != geteuid())
		return al_error_set(err, EPERM,
				    "--token-file %s: owned by uid %u, not by airlock's uid %u "
				    "(chown)",
				    path, (unsigned)st.st_uid, (unsigned)geteuid());
	if (st.st_mode & 077)
		return al_error_set(
		    err, EPERM,
		    "--token-file %s: mode %04o: bearer tokens must not be readable "
		    "or writable by group or others (chmod 600)",
		    path, (unsigned)st.st_mode & 07777);
	buf = xmalloc(TOKEN_FILE_MAX + 1);
	if ((len = read(fd, buf, TOKEN_FILE_MAX + 1)) < 0)
		return al_error_setsys(err, errno, "--token-file %s: read", path);
	if (len > TOKEN_FILE_MAX)
		return al_error_set(err, EFBIG, "--token-file %s: over %d bytes", path,
				    TOKEN_FILE_MAX);
	buf[len] = '\0';
	for (char *p = buf, *nl; *p; p = nl) {
		char tok[256], id[256], extra[2];
		nl = strchr(p, '\n');
		nl = nl ? (*nl = '\0', nl + 1) : p + strlen(p);
		line++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p || *p == '#')
			continue;
		int k = sscanf(p, "%255s %255s %1s", tok, id, extra);
		if (k != 2 || strlen(tok) < TOKEN_MIN || strlen(tok) > AL_SERVE_TOKEN_MAX ||
		    strlen(id) >= sizeof(v->identity) || !identity_ok(id)) {
			free(v);
			return al_error_set(
			    err, EINVAL,
			    "--token-file %s:%zu: expected \"TOKEN IDENTITY\" (a token "
			    "of %d-%d characters, an identity of letters, digits and "
			    "._-@)",
			    path, line, TOKEN_MIN, AL_SERVE_TOKEN_MAX);
		}
		v = xrealloc(v, (n + 1) * sizeof(*v));
		snprintf(v[n].token, sizeof(v[n].token), "%s", tok);
		snprintf(v[n].identity, sizeof(v[n].identity), "%s", id);
		n++;
	}
	if (n == 0)
		return al_error_set(err, EINVAL, "--token-file %s: no token in it", path);
	*ret = v;
	*ret_n = n;
	return 0;
}

const char *al_serve_token_identity(const struct al_token *t, size_t n, const char *token)
{
	size_t len = strlen(token);
	const char *found = NULL;

	if (len > AL_SERVE_TOKEN_MAX)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		unsigned char diff = (unsigned char)(strlen(t[i].token) != len);
		for (size_t k = 0; k < len; k++)
			diff |= (unsigned char)(t[i].token[k] ^ token[k]);
		if (!diff && !found)
			found = t[i].identity;
	}
	return found;
}

/* The listening socket systemd passes (sd_listen_fds(3)): LISTEN_PID is
 * this process, LISTEN_FDS the number of descriptors from fd 3 on,
 * LISTEN_FDNAMES their names separated by ':'. The variables are removed
 * whatever they say, so that no process started later sees them. */
int al_serve_socket_activation(struct al_serve_config *cfg, struct al_error *err)
{
	const char *pid_s = getenv("LISTEN_PID"), *fds_s = getenv("LISTEN_FDS"),
		   *names = getenv("LISTEN_FDNAMES");
	_cleanup_free_ char *fds_copy = fds_s ? xstrdup(fds_s) : NULL;
	_cleanup_free_ char *names_copy = names ? xstrdup(names) : NULL;
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int domain = 0, type = 0, acc = 0, fd = AL_LISTEN_FDS_START;
	socklen_t ol = sizeof(int);
	unsigned long pid, n;
	struct stat st;
	char *end;

	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	if (!pid_s)
		return 0;
	/* Set for another process (inherited by mistake): not ours. */
	pid = strtoul(pid_s, &end, 10);
	if (!*pid_s || *end || pid != (unsigned long)getpid())
		return 0;
	if (!fds_copy)
		return 0;
	n = strtoul(fds_copy, &end, 10);
	if (!*fds_copy || *end)
		return al_error_set(
		    err, EINVAL, "socket activation: LISTEN_FDS=\"%s\" is not a number", fds_copy);
	if (n == 0)
		return 0;
	if (n != 1)
		return al_error_set(
		    err, EINVAL,
		    "socket activation: LISTEN_FDS=%lu, but airlock serve takes one "
		    "socket from systemd (one ListenStream= of a Unix socket; TCP is "
		    "--listen)",
		    n);
	if (names_copy && strchr(names_copy, ':'))
		return al_error_set(err, EINVAL,
				    "socket activation: LISTEN_FDNAMES=\"%s\" names more than the "
				    "one socket LISTEN_FDS gives",
				    names_copy);
	if (fstat(fd, &st) < 0)
		return al_error_setsys(err, errno, "socket activation: fd %d (LISTEN_FDS=1)", fd);
	if (!S_ISSOCK(st.st_mode) || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &ol) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ol) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &ol) < 0 || domain != AF_UNIX ||
	    type != SOCK_STREAM || !acc)
		return al_error_set(
		    err, EINVAL,
		    "socket activation: fd %d is not a listening Unix stream socket "
		    "(a socket unit with ListenStream=/PATH and Accept=no gives one)",
		    fd);
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return al_error_setsys(err, errno, "socket activation: getsockname of fd %d", fd);
	/* An abstract or unnamed socket has no file whose mode keeps other
	 * users out. */
	if (len <= offsetof(struct sockaddr_un, sun_path) || sa.sun_path[0] == '\0')
		return al_error_set(err, EINVAL,
				    "socket activation: fd %d is not bound to a path (an abstract "
				    "socket has no file mode to keep other users out)",
				    fd);
	sa.sun_path[sizeof(sa.sun_path) - 1] = '\0';
	if (cfg->socket_path && strcmp(cfg->socket_path, sa.sun_path) != 0)
		return al_error_set(err, EINVAL,
				    "--socket %s: systemd passed the socket %s (drop --socket, or "
				    "name the socket unit's ListenStream=)",
				    cfg->socket_path, sa.sun_path);
	if (cfg->socket_group)
		return al_error_set(
		    err, EINVAL,
		    "--socket-group: the socket came from systemd, whose socket unit "
		    "sets its group and mode (SocketGroup=, SocketMode=)");
	/* The monitor polls it and accepts until EAGAIN; no session or
	 * sandbox may inherit it. */
	if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0)
		return al_error_setsys(err, errno, "socket activation: fcntl of fd %d", fd);
	if (!cfg->socket_path)
		cfg->socket_path = xstrdup(sa.sun_path);
	cfg->socket_fd = fd;
	return fd;
}
