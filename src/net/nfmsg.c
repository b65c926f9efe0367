#include "net/nfmsg.h"

#include <arpa/inet.h>
#include <endian.h>
#include <linux/netfilter/nfnetlink.h>
#include <string.h>
#include <sys/socket.h>

void al_nfmsg_init(struct al_nfmsg *b, uint32_t seq)
{
	b->len = 0;
	b->seq = seq;
	b->msg = NULL;
	b->overflow = false;
}

static void *put(struct al_nfmsg *b, size_t len)
{
	size_t al = NLMSG_ALIGN(len);

	if (b->overflow || b->len + al > sizeof(b->buf)) {
		b->overflow = true;
		return NULL;
	}
	void *p = b->buf + b->len;
	memset(p, 0, al);
	b->len += al;
	return p;
}

uint16_t al_nft_type(int msg)
{
	return (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | msg);
}

void al_nfmsg_end(struct al_nfmsg *b)
{
	if (b->msg && !b->overflow)
		b->msg->nlmsg_len = (uint32_t)((b->buf + b->len) - (char *)b->msg);
}

void al_nfmsg_begin(struct al_nfmsg *b, uint16_t type, uint16_t flags, uint8_t family)
{
	al_nfmsg_end(b);
	struct nlmsghdr *nh = put(b, NLMSG_HDRLEN);
	struct nfgenmsg *g = put(b, sizeof(*g));
	if (!nh || !g)
		return;
	nh->nlmsg_type = type;
	nh->nlmsg_flags = NLM_F_REQUEST | flags;
	nh->nlmsg_seq = b->seq++;
	g->nfgen_family = family;
	g->version = NFNETLINK_V0;
	if (type == NFNL_MSG_BATCH_BEGIN || type == NFNL_MSG_BATCH_END) {
		g->nfgen_family = AF_UNSPEC;
		g->res_id = htons(NFNL_SUBSYS_NFTABLES);
	}
	b->msg = nh;
}

void al_nfmsg_attr(struct al_nfmsg *b, uint16_t type, const void *data, size_t len)
{
	struct nlattr *a = put(b, NLA_HDRLEN + len);

	if (!a)
		return;
	a->nla_type = type;
	a->nla_len = (uint16_t)(NLA_HDRLEN + len);
	memcpy((char *)a + NLA_HDRLEN, data, len);
}

void al_nfmsg_attr_str(struct al_nfmsg *b, uint16_t type, const char *s)
{
	al_nfmsg_attr(b, type, s, strlen(s) + 1);
}

void al_nfmsg_attr_be32(struct al_nfmsg *b, uint16_t type, uint32_t v)
{
	v = htonl(v);
	al_nfmsg_attr(b, type, &v, sizeof(v));
}

void al_nfmsg_attr_be64(struct al_nfmsg *b, uint16_t type, uint64_t v)
{
	v = htobe64(v);
	al_nfmsg_attr(b, type, &v, sizeof(v));
}

size_t al_nfmsg_nest(struct al_nfmsg *b, uint16_t type)
{
	size_t at = b->len;
	struct nlattr *a = put(b, NLA_HDRLEN);

	if (a)
		a->nla_type = type | NLA_F_NESTED;
	return at;
}

void al_nfmsg_nest_end(struct al_nfmsg *b, size_t at)
{
	if (!b->overflow)
		((struct nlattr *)(b->buf + at))->nla_len = (uint16_t)(b->len - at);
}

bool al_nfmsg_attr_get(const struct nlmsghdr *nh, uint16_t type, const void **data, size_t *len)
{
	size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(struct nfgenmsg));

	while (off + NLA_HDRLEN <= nh->nlmsg_len) {
		struct nlattr a;
		memcpy(&a, (const char *)nh + off, sizeof(a));
		if (a.nla_len < NLA_HDRLEN || off + a.nla_len > nh->nlmsg_len)
			return false;
		if ((a.nla_type & NLA_TYPE_MASK) == type) {
			*data = (const char *)nh + off + NLA_HDRLEN;
			*len = a.nla_len - NLA_HDRLEN;
			return true;
		}
		off += NLA_ALIGN(a.nla_len);
	}
	return false;
}
