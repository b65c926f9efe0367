/* The verbs' messages to a container's supervisor (proto.h). */
#include "oci/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/cleanup.h"

int al_oci_send(int sock, json_t *o, const int *fds, size_t n)
{
	_cleanup_free_ char *text = json_dumps(o, JSON_COMPACT);
	char ctl[CMSG_SPACE(sizeof(int) * AL_OCI_MSG_FDS)] = {0};

	if (!text || n > AL_OCI_MSG_FDS)
		return -EINVAL;
	size_t len = strlen(text);
	if (len > AL_OCI_MSG_MAX)
		return -EMSGSIZE;
	struct iovec iov = {.iov_base = text, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (n) {
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * n);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
		memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	}
	ssize_t r;
	do
		r = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	return (size_t)r == len ? 0 : -EPIPE;
}

int al_oci_recv(int sock, json_t **ret, int *fds, size_t *n_fds, struct al_error *err)
{
	_cleanup_free_ char *buf = malloc(AL_OCI_MSG_MAX + 1);
	char ctl[CMSG_SPACE(sizeof(int) * (AL_OCI_MSG_FDS + 8))];
	struct iovec iov = {.iov_base = buf, .iov_len = AL_OCI_MSG_MAX + 1};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	json_error_t je;
	ssize_t r;

	*ret = NULL;
	*n_fds = 0;
	if (!buf)
		return al_error_set(err, ENOMEM, "no memory for a message");
	do
		r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -EAGAIN;
	if (r < 0)
		return al_error_setsys(err, errno, "reading a message");
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int *got = (int *)CMSG_DATA(cm);
		for (size_t i = 0; i < k; i++) {
			if (*n_fds < AL_OCI_MSG_FDS)
				fds[(*n_fds)++] = got[i];
			else
				close(got[i]);
		}
	}
	if (r == 0 && *n_fds == 0)
		return -EPIPE;
	if ((mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || (size_t)r > AL_OCI_MSG_MAX) {
		r = al_error_set(err, EMSGSIZE,
				 "a message over %u bytes, or with too many descriptors",
				 AL_OCI_MSG_MAX);
		goto bad;
	}
	*ret = json_loadb(buf, (size_t)r, JSON_REJECT_DUPLICATES, &je);
	if (!*ret || !json_is_object(*ret)) {
		r = al_error_set(err, EPROTO, "a message that is not a JSON object%s%s",
				 *ret ? "" : ": ", *ret ? "" : je.text);
		json_decref(*ret);
		*ret = NULL;
		goto bad;
	}
	return 0;
bad:
	for (size_t i = 0; i < *n_fds; i++)
		close(fds[i]);
	*n_fds = 0;
	return (int)r;
}

int al_oci_connect(const char *path, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

int al_oci_call(int sock, json_t *o, json_t **ret, struct al_error *err)
{
	int fds[AL_OCI_MSG_FDS];
	size_t n = 0;
	int r;

	*ret = NULL;
	if ((r = al_oci_send(sock, o, NULL, 0)) < 0)
		return al_error_setsys(err, -r, "asking the container's supervisor");
	r = al_oci_recv(sock, ret, fds, &n, err);
	for (size_t i = 0; i < n; i++)
		close(fds[i]);
	if (r == -EPIPE || r == -EAGAIN)
		return al_error_set(err, r == -EPIPE ? EPIPE : ETIMEDOUT,
				    "the container's supervisor %s",
				    r == -EPIPE ? "hung up" : "did not answer in time");
	if (r < 0)
		return r;
	json_t *e = json_object_get(*ret, "error");
	if (e) {
		json_int_t code = json_integer_value(json_object_get(*ret, "errno"));
		r = al_error_set(err, code > 0 && code < 4096 ? (int)code : EIO, "%s",
				 json_is_string(e) ? json_string_value(e) : "an error");
		json_decref(*ret);
		*ret = NULL;
		return r;
	}
	return 0;
}
