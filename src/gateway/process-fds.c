/* The supervisor's side of handing the gateway's process its sockets: the
 * listeners (made in the sandbox's network namespace, or on the host's
 * loopback by the process backend) and, before those, the peer check's
 * NETLINK_SOCK_DIAG socket with the run's uid. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gateway/process-internal.h"
#include "gateway/process.h"
#include "gateway/proto.h"

/* One message, n bytes of buf (n < 0: it did not fit, an error), with fd
 * attached (consumed). */
static int send_with_fd(struct al_gateway_proc *gp, const uint8_t *buf, int n, int fd,
			const char *what, struct al_error *err)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {(void *)buf, n > 0 ? (size_t)n : 0};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	int r = 0;

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (n <= 0)
		r = al_error_set(err, ENOSPC, "gateway: encoding %s", what);
	else if (sendmsg(gp->sock, &mh, MSG_NOSIGNAL) != n)
		/* Its end is gone: the gateway died (or closed its socket)
		 * before it took what the run hands it. */
		r = (errno == EPIPE || errno == ECONNRESET)
			? al_error_setsys(err, errno,
					  "gateway: the gateway process died or closed its socket "
					  "while airlock handed over %s",
					  what)
			: al_error_setsys(err, errno, "gateway: handing over %s", what);
	close(fd);
	return r;
}

int al_gateway_proc_listen(struct al_gateway_proc *gp, enum al_gateway_listener kind, int fd,
			   struct al_error *err)
{
	uint8_t buf[64];
	return send_with_fd(gp, buf, al_gwp_encode_listener(kind, buf, sizeof(buf)), fd,
			    "a listener", err);
}

int al_gateway_proc_peers(struct al_gateway_proc *gp, uid_t uid, int diag, struct al_error *err)
{
	uint8_t buf[64];
	return send_with_fd(gp, buf, al_gwp_encode_peers((uint32_t)uid, buf, sizeof(buf)), diag,
			    "the peer check's socket", err);
}
