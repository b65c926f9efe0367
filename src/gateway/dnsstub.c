/* The DNS stub on 127.0.0.1:53 (UDP, and TCP as a connection's head
 * stage): allowed names (by some rule, or mapped in network.hosts) get a
 * fake address for A and no record for AAAA; every other name, type or
 * class is refused, and every query is audited — a name that carries a
 * secret never leaves the gateway. */
#include "gateway/conn.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "core/log.h"
#include "gateway/dns.h"

static void audit_dns(struct al_gateway *gw, const struct al_dns_query *q, const char *decision,
		      const char *answer, const char *reason)
{
	al_audit_emit(gw->audit, "net.dns",
		      json_pack("{s:s, s:i, s:s, s:s?, s:s?}", "name", q->name, "qtype", q->qtype,
				"decision", decision, "answer", answer, "reason", reason));
}

static int dns_answer(struct al_gateway *gw, const uint8_t *msg, size_t len, unsigned flags,
		      uint8_t *out, size_t size)
{
	struct al_dns_query q;
	struct al_error err = {0};
	struct in6_addr addr;
	char text[INET6_ADDRSTRLEN];
	int r = al_dns_parse_query(msg, len, &q, &err);

	if (r < 0) {
		gw->st.dns_refused++;
		al_audit_emit(gw->audit, "net.dns",
			      json_pack("{s:s, s:s}", "decision", "malformed", "reason", err.msg));
		gw_refused(gw, AL_GW_REFUSED_DNS, NULL, 0, NULL, "malformed");
		return al_dns_format_bare_error(
		    msg, len, r == -EOPNOTSUPP ? AL_DNS_RCODE_NOTIMP : AL_DNS_RCODE_FORMERR, out,
		    size);
	}
	if (gw->held) {
		gw->st.dns_refused++;
		audit_dns(gw, &q, "deny", NULL, AL_GATEWAY_HELD);
		gw_refused(gw, AL_GW_REFUSED_DNS, q.name, 0, NULL, "not claimed yet");
		return al_dns_format_error(&q, AL_DNS_RCODE_REFUSED, out, size);
	}
	/* network.hosts only says where a name is; the allowlist says whether
	 * it may be reached, and only then does it resolve in here. */
	ssize_t needle = gw_needle_in_name(gw, q.name);
	if (needle >= 0) {
		gw->st.dns_refused++;
		gw_audit_misuse(gw, (size_t)needle, "DNS name", q.name, 53);
		audit_dns(gw, &q, "deny", NULL, "the name carries a secret's placeholder");
		gw_refused(gw, AL_GW_REFUSED_DNS, q.name, 0, NULL, "a secret's placeholder");
		return al_dns_format_error(&q, AL_DNS_RCODE_NXDOMAIN, out, size);
	}
	/* A name the operator never allows (on some port) gets no answer
	 * either: its connections would be refused anyway. */
	if (gw->plan->never && al_allow_match_name_any_port(gw->plan->never, q.name, NULL)) {
		gw->st.dns_refused++;
		audit_dns(gw, &q, "deny", NULL, "the operator policy never allows this name");
		gw_refused(gw, AL_GW_REFUSED_DNS, q.name, 0, NULL, "never allowed");
		return al_dns_format_error(&q, AL_DNS_RCODE_NXDOMAIN, out, size);
	}
	if (!al_allow_match_name_any_port(gw->plan->allow, q.name, NULL)) {
		gw->st.dns_refused++;
		audit_dns(gw, &q, "deny", NULL, "no rule allows this name");
		gw_refused(gw, AL_GW_REFUSED_DNS, q.name, 0, NULL, "no rule");
		return al_dns_format_error(&q, AL_DNS_RCODE_NXDOMAIN, out, size);
	}
	if (q.qclass != AL_DNS_CLASS_IN ||
	    (q.qtype != AL_DNS_TYPE_A && q.qtype != AL_DNS_TYPE_AAAA)) {
		gw->st.dns_refused++;
		audit_dns(gw, &q, "deny", NULL, "only A and AAAA queries are answered");
		gw_refused(gw, AL_GW_REFUSED_DNS, q.name, 0, NULL, "not an A or AAAA query");
		return al_dns_format_error(&q, AL_DNS_RCODE_REFUSED, out, size);
	}
	if (!gw_fake_addr(gw, q.name, &addr)) {
		audit_dns(gw, &q, "deny", NULL, "the fake address range is used up");
		return al_dns_format_error(&q, AL_DNS_RCODE_SERVFAIL, out, size);
	}
	gw->st.dns_answered++;
	al_addr_format(&addr, text, sizeof(text));
	audit_dns(gw, &q, "allow", q.qtype == AL_DNS_TYPE_A ? text : NULL, NULL);
	/* AAAA gets NODATA: the fake range is IPv4 and clients fall back. */
	return al_dns_format_answer(&q, &addr, 1, 60, flags, out, size);
}

/* Queries taken per wake-up: a resolver asks for A and AAAA at once
 * (glibc sends both with one sendmmsg), so both are usually waiting. */
#define DNS_BATCH 4

void gw_dns_udp(struct al_gateway *gw, int fd)
{
	uint8_t msg[DNS_BATCH][4096], out[DNS_BATCH][4096]; /* 32 KiB of stack */
	struct sockaddr_storage from[DNS_BATCH];
	struct iovec in_iov[DNS_BATCH], out_iov[DNS_BATCH];
	struct mmsghdr in[DNS_BATCH], ans[DNS_BATCH];
	unsigned n_ans = 0;

	for (unsigned i = 0; i < DNS_BATCH; i++) {
		in_iov[i] = (struct iovec){msg[i], sizeof(msg[i])};
		in[i] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i],
						     .msg_namelen = sizeof(from[i]),
						     .msg_iov = &in_iov[i],
						     .msg_iovlen = 1}};
	}
	/* Whatever is queued, up to DNS_BATCH, in one call: MSG_DONTWAIT
	 * returns once the queue is empty, as recvfrom would. */
	int n = recvmmsg(fd, in, DNS_BATCH, MSG_DONTWAIT, NULL);
	for (int i = 0; i < n; i++) {
		int m = dns_answer(gw, msg[i], in[i].msg_len, 0, out[n_ans], sizeof(out[n_ans]));
		if (m <= 0)
			continue;
		out_iov[n_ans] = (struct iovec){out[n_ans], (size_t)m};
		ans[n_ans] = (struct mmsghdr){.msg_hdr = {.msg_name = &from[i],
							  .msg_namelen = in[i].msg_hdr.msg_namelen,
							  .msg_iov = &out_iov[n_ans],
							  .msg_iovlen = 1}};
		n_ans++;
	}
	/* sendmmsg stops at the first answer it cannot send (and says why
	 * only when that is the first): the answers after it are still owed
	 * to their own clients, each of which had its own sendto before. So
	 * the rest goes again, past the one that failed; each call moves on
	 * by at least one answer. */
	for (unsigned sent = 0; sent < n_ans;) {
		int r = sendmmsg(fd, ans + sent, n_ans - sent, MSG_DONTWAIT);
		if (r > 0) {
			sent += (unsigned)r;
			continue;
		}
		al_debug("gateway: a DNS answer not sent: %s",
			 r < 0 ? strerror(errno) : "none sent");
		sent++;
	}
}

/* DNS over TCP: one query per connection, answered and closed. */
enum gw_step gw_head_dns_tcp(struct conn *c)
{
	size_t off, len;
	uint8_t out[4096 + 2];
	ssize_t n;
	int r;

	n = recv(c->client.fd, c->head + c->head_len, sizeof(c->head) - c->head_len, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return GW_WAIT;
	if (n <= 0)
		return GW_CLOSE;
	c->head_len += (size_t)n;
	r = al_dns_tcp_frame((const uint8_t *)c->head, c->head_len, &off, &len);
	if (r == -EAGAIN && c->head_len < sizeof(c->head))
		return GW_WAIT;
	if (r >= 0) {
		int m = dns_answer(c->gw, (const uint8_t *)c->head + off, len, AL_DNS_TCP, out + 2,
				   sizeof(out) - 2);
		if (m > 0) {
			out[0] = (uint8_t)(m >> 8);
			out[1] = (uint8_t)m;
			gw_reply(c, out, (size_t)m + 2);
		}
	}
	return GW_CLOSE;
}
