/* The VMM's side of the channel (vmm-internal.h): frames decoded as they
 * come, every header checked by al_guest_hdr_get before its payload is
 * waited for, each message checked against the state it may come in, and
 * the relays (the exec's stdio, the guest's connections, its DNS
 * exchanges) with their windows. The guest is hostile: any message out of
 * place ends the run with "the guest broke the channel protocol: WHAT". */
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/microvm/vmm-internal.h"
#include "core/util.h"
#include "net/layout.h"

void vmm_queue_init(struct vmm_queue *q, size_t cap)
{
	q->b = xmalloc(cap);
	q->cap = cap;
	q->off = q->len = 0;
}

void vmm_queue_free(struct vmm_queue *q)
{
	free(q->b);
	q->b = NULL;
	q->cap = q->off = q->len = 0;
}

uint8_t *vmm_queue_room(struct vmm_queue *q, size_t n)
{
	if (q->len + n > q->cap)
		return NULL;
	if (q->off + q->len + n > q->cap) {
		memmove(q->b, q->b + q->off, q->len);
		q->off = 0;
	}
	return q->b + q->off + q->len;
}

void vmm_init(struct vmm *v, const struct vmm_config *cfg, int chan, bool dry)
{
	memset(v, 0, sizeof(*v));
	v->cfg = cfg;
	v->dry = dry;
	v->chan = chan;
	v->fd_out[0] = 1;
	v->fd_out[1] = 2;
	v->fd_in = 0;
	v->work_fd = -1;
	v->listen_fd = -1;
	v->next_id = VMM_EXEC_ID; /* a session's execs from 2 */
	v->phase = VMM_BOOT;
	vmm_queue_init(&v->out, VMM_OUT_CAP);
	for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++)
		v->dgrams[i].fd = -1;
	for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++)
		v->draining[i] = -1;
	v->walk.reg = -1;
	v->get.fd = v->get.dir = -1;
}

void vmm_free(struct vmm *v)
{
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS; i++)
		if (v->streams[i])
			vmm_stream_free(v, i, false);
	for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++)
		if (v->dgrams[i].fd >= 0)
			close(v->dgrams[i].fd);
	vmm_walk_free(v);
	vmm_file_abort(v);
	vmm_queue_free(&v->out);
	for (size_t i = 0; i < AL_GUEST_MAX_EXECS; i++) {
		if (v->execs[i])
			vmm_exec_free(v, i);
		if (v->draining[i] >= 0)
			close(v->draining[i]);
	}
}

static __attribute__((format(printf, 3, 0))) int vfail(struct vmm *v, const char *prefix,
						       const char *fmt, va_list ap)
{
	if (!v->failed) {
		size_t n = (size_t)snprintf(v->why, sizeof(v->why), "%s", prefix);
		if (n < sizeof(v->why))
			vsnprintf(v->why + n, sizeof(v->why) - n, fmt, ap);
		v->failed = true;
	}
	return -1;
}

int vmm_fail(struct vmm *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(v, "", fmt, ap);
	va_end(ap);
	return -1;
}

int vmm_proto(struct vmm *v, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfail(v, "the guest broke the channel protocol: ", fmt, ap);
	va_end(ap);
	return -1;
}

int vmm_send(struct vmm *v, uint8_t type, uint8_t flags, uint32_t id, const void *p, uint32_t len)
{
	uint8_t *at = vmm_queue_room(&v->out, AL_GUEST_HEADER + (size_t)len);
	if (!at) /* the bounds above make this unreachable */
		return vmm_fail(v, "the queue to the guest is full (%zu bytes)", v->out.len);
	al_guest_hdr_put(at, type, flags, id, len);
	if (len)
		memcpy(at + AL_GUEST_HEADER, p, len);
	v->out.len += AL_GUEST_HEADER + (size_t)len;
	return 0;
}

static int send_u32(struct vmm *v, uint8_t type, uint8_t flags, uint32_t id, uint32_t x)
{
	uint8_t p[4];
	al_guest_put32(p, x);
	return vmm_send(v, type, flags, id, p, 4);
}

/* --- Connections ------------------------------------------------------ */

static struct vmm_stream *stream_find(struct vmm *v, uint32_t id, size_t *slot)
{
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS; i++)
		if (v->streams[i] && v->streams[i]->id == id) {
			if (slot)
				*slot = i;
			return v->streams[i];
		}
	return NULL;
}

/* A stream we closed while the guest may still have sent messages of it:
 * those crossed our CLOSE and are dropped, not a protocol error. */
static bool recent(const struct vmm *v, uint32_t id)
{
	for (size_t i = 0; i < VMM_RECENT; i++)
		if (v->recent[i] == id)
			return true;
	return false;
}

static void forget_recent(struct vmm *v, uint32_t id)
{
	for (size_t i = 0; i < VMM_RECENT; i++)
		if (v->recent[i] == id)
			v->recent[i] = 0;
}

void vmm_stream_free(struct vmm *v, size_t i, bool send_close)
{
	struct vmm_stream *s = v->streams[i];
	if (send_close) {
		vmm_send(v, AL_G_CLOSE, 0, s->id, NULL, 0);
		v->recent[v->recent_next++ % VMM_RECENT] = s->id;
	}
	if (s->fd >= 0)
		close(s->fd);
	vmm_queue_free(&s->to);
	free(s);
	v->streams[i] = NULL;
}

/* Where a guest connection may go: the gateway's proxy and DNS listeners
 * on the sandbox's loopback, or the DNS stub's fake addresses at the
 * capture ports (the nftables capture sends those to the gateway). */
static bool allowed(uint32_t addr, uint16_t port)
{
	if (addr == INADDR_LOOPBACK)
		return port == AL_GATEWAY_HTTP_PORT || port == AL_GATEWAY_SOCKS_PORT ||
		       port == AL_GATEWAY_DNS_PORT;
	if ((addr & 0xfffe0000u) == AL_GATEWAY_FAKE_NET)
		return port == 80 || port == 443;
	return false;
}

/* OPEN_FAILED: the guest's messages of the stream that cross it are
 * dropped, as after our CLOSE. */
static int refuse(struct vmm *v, uint32_t id, int err)
{
	v->recent[v->recent_next++ % VMM_RECENT] = id;
	return send_u32(v, AL_G_OPEN_FAILED, 0, id, (uint32_t)err);
}

static int on_open(struct vmm *v, uint32_t id, const uint8_t *p, uint32_t len)
{
	if (len != 8 || id == 0)
		return vmm_proto(v, "OPEN with %s", id == 0 ? "id 0" : "a bad payload");
	if (stream_find(v, id, NULL))
		return vmm_proto(v, "OPEN of stream %u, which is open", id);
	forget_recent(v, id);
	uint16_t port = (uint16_t)(p[2] << 8 | p[3]);
	uint32_t addr = (uint32_t)p[4] << 24 | (uint32_t)p[5] << 16 | (uint32_t)p[6] << 8 | p[7];
	if (!v->cfg->network || p[0] != IPPROTO_TCP || p[1] != 0 || !allowed(addr, port))
		return refuse(v, id, EACCES);
	size_t slot = AL_GUEST_MAX_STREAMS;
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS && slot == AL_GUEST_MAX_STREAMS; i++)
		if (!v->streams[i])
			slot = i;
	if (slot == AL_GUEST_MAX_STREAMS)
		return refuse(v, id, EMFILE);
	int fd = -1;
	bool connecting = false;
	if (!v->dry) {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return refuse(v, id, errno);
		struct sockaddr_in sa = {
		    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(addr)};
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			if (errno != EINPROGRESS) {
				int e = errno;
				close(fd);
				return refuse(v, id, e);
			}
			connecting = true;
		}
	}
	struct vmm_stream *s = xcalloc(1, sizeof(*s));
	s->id = id;
	s->fd = fd;
	s->connecting = connecting;
	s->credit = AL_GUEST_WINDOW;
	vmm_queue_init(&s->to, AL_GUEST_WINDOW);
	v->streams[slot] = s;
	return connecting ? 0 : vmm_send(v, AL_G_OPEN_OK, 0, id, NULL, 0);
}

static int on_stream_msg(struct vmm *v, const struct al_guest_hdr *h, const uint8_t *p)
{
	size_t slot;
	struct vmm_stream *s = stream_find(v, h->id, &slot);
	if (!s) {
		if (h->id != 0 && recent(v, h->id)) {
			if (h->type == AL_G_CLOSE)
				forget_recent(v, h->id);
			return 0;
		}
		return vmm_proto(v, "message type %u for stream %u, which is not open", h->type,
				 h->id);
	}
	switch (h->type) {
	case AL_G_DATA:
		if (h->len == 0 || s->guest_shut)
			return vmm_proto(v, "DATA %s on stream %u",
					 h->len ? "after SHUT" : "of no bytes", h->id);
		if (s->to.len + h->len > AL_GUEST_WINDOW)
			return vmm_proto(v, "DATA past the window of stream %u", h->id);
		if (s->fd < 0) /* dry: taken and acknowledged at once */
			return send_u32(v, AL_G_WINDOW, 0, h->id, h->len);
		memcpy(vmm_queue_room(&s->to, h->len), p, h->len);
		s->to.len += h->len;
		return 0;
	case AL_G_SHUT:
		if (s->guest_shut)
			return vmm_proto(v, "SHUT twice on stream %u", h->id);
		s->guest_shut = true;
		return 0;
	case AL_G_CLOSE:
		vmm_stream_free(v, slot, false);
		return 0;
	case AL_G_WINDOW: {
		if (h->len != 4)
			return vmm_proto(v, "WINDOW with a bad payload");
		uint32_t k = al_guest_get32(p);
		if (k > AL_GUEST_WINDOW - s->credit)
			return vmm_proto(v, "WINDOW of stream %u acknowledges more than was sent",
					 h->id);
		s->credit += k;
		return 0;
	}
	}
	return vmm_proto(v, "message type %u", h->type);
}

static int on_dgram(struct vmm *v, uint32_t id, const uint8_t *p, uint32_t len)
{
	if (id == 0 || len == 0)
		return vmm_proto(v, "DGRAM with %s", id ? "no bytes" : "id 0");
	size_t freeslot = AL_GUEST_MAX_DGRAMS;
	for (size_t i = 0; i < AL_GUEST_MAX_DGRAMS; i++) {
		if (v->dgrams[i].fd >= 0 && v->dgrams[i].id == id)
			return vmm_proto(v, "DGRAM %u while it is in flight", id);
		if (v->dgrams[i].fd < 0 && freeslot == AL_GUEST_MAX_DGRAMS)
			freeslot = i;
	}
	/* Without network, in dry mode or past the bound, the datagram is
	 * dropped as UDP may drop it: the guest's resolver retries. */
	if (!v->cfg->network || v->dry || freeslot == AL_GUEST_MAX_DGRAMS)
		return 0;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(AL_GATEWAY_DNS_PORT),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || send(fd, p, len, 0) < 0) {
		close(fd);
		return 0;
	}
	v->dgrams[freeslot] = (struct vmm_dgram){.id = id, .fd = fd, .deadline = v->now_ms + 5000};
	return 0;
}

/* --- The exec ------------------------------------------------------- */

int vmm_send_exec(struct vmm *v)
{
	const struct vmm_config *c = v->cfg;
	uint8_t buf[AL_GUEST_MAX_PAYLOAD];
	uint32_t argc = (uint32_t)al_strv_len(c->argv), envc = (uint32_t)al_strv_len(c->env);
	size_t off = 8;
	al_guest_put32(buf, argc);
	al_guest_put32(buf + 4, envc);
	/* vmm.c checked that all of it fits one payload. */
	size_t n = strlen(c->cwd) + 1;
	memcpy(buf + off, c->cwd, n), off += n;
	for (char **s = c->argv; *s; s++)
		n = strlen(*s) + 1, memcpy(buf + off, *s, n), off += n;
	for (char **s = c->env; s && *s; s++)
		n = strlen(*s) + 1, memcpy(buf + off, *s, n), off += n;
	struct vmm_exec *x = vmm_exec_add(v, VMM_EXEC_ID, v->fd_in, v->fd_out[0], v->fd_out[1]);
	x->sent = true;
	v->phase = VMM_RUN;
	/* -t: our stdin's terminal (raw since the start) and its size now;
	 * a later size goes as WINSIZE (vmm_pump). 24x80 where it has none. */
	if (c->tty) {
		x->tty = true;
		if (vmm_tty_size(v->fd_in, &x->rows, &x->cols) < 0)
			x->rows = 24, x->cols = 80;
		al_guest_put16(buf + off, x->rows);
		al_guest_put16(buf + off + 2, x->cols);
		al_guest_put32(buf + off + 4, 0);
		off += AL_GUEST_EXEC_TTY_LEN;
	}
	return vmm_send(v, AL_G_EXEC, c->tty ? AL_GUEST_EXEC_TTY : 0, VMM_EXEC_ID, buf,
			(uint32_t)off);
}

/* After HELLO, or once the copy-in tree is sent: the configured exec, or
 * a session's clients served (vmm_sess_pump sends their EXECs). */
int vmm_ready(struct vmm *v)
{
	if (v->phase == VMM_BOOT && v->cfg->copy_in) {
		v->phase = VMM_FILES_IN;
		return 0; /* vmm_pump walks the tree */
	}
	if (v->cfg->session) {
		v->phase = VMM_SERVE;
		return 0;
	}
	return vmm_send_exec(v);
}

static int on_hello(struct vmm *v, const uint8_t *p, uint32_t len)
{
	if (v->phase != VMM_BOOT)
		return vmm_proto(v, "HELLO twice");
	if (len < 4)
		return vmm_proto(v, "HELLO with a bad payload");
	uint32_t version = al_guest_get32(p);
	if (version != AL_GUEST_PROTO_VERSION)
		return vmm_fail(v, "the guest agent speaks protocol version %u, not %u", version,
				AL_GUEST_PROTO_VERSION);
	v->pings = 0;
	v->next_ping_ms = v->now_ms + 1000;
	v->t_hello = vmm_now_us();
	return vmm_ready(v);
}

static int on_output(struct vmm *v, const struct al_guest_hdr *h, const uint8_t *p)
{
	struct vmm_exec *x = vmm_exec_find(v, h->id, NULL);
	if (!x || !x->started || x->exited)
		return vmm_proto(v, "%s for exec %u, which is not running",
				 h->type == AL_G_STDERR ? "STDERR" : "STDOUT", h->id);
	int i = h->type == AL_G_STDERR;
	struct vmm_queue *q = &x->stdio[i];
	if (q->len + h->len > AL_GUEST_WINDOW)
		return vmm_proto(v, "%s past its window",
				 h->type == AL_G_STDERR ? "STDERR" : "STDOUT");
	if (x->fd_out[i] < 0) /* its client went: dropped, acknowledged */
		return h->len ? send_u32(v, AL_G_WINDOW, (uint8_t)(2 + i), h->id, h->len) : 0;
	if (h->len) {
		memcpy(vmm_queue_room(q, h->len), p, h->len);
		q->len += h->len;
	}
	return 0;
}

/* The exec is over: a session's is answered once its output is out
 * (vmm_sess_pump); after the configured one, the guest's /work back
 * (--copy-out), or power off. */
static int exec_ended(struct vmm *v, struct vmm_exec *x, size_t slot)
{
	x->exited = true;
	x->stdin_open = false;
	if (v->cfg->session) {
		if (x->gone)
			vmm_exec_free(v, slot);
		return 0;
	}
	v->exit = x->exit;
	if (v->cfg->copy_out) {
		if (vmm_work_clear(v) < 0)
			return -1;
		uint8_t caps[16];
		al_guest_put64(caps, v->cfg->out_bytes);
		al_guest_put64(caps + 8, v->cfg->out_files);
		v->phase = VMM_FILES_OUT;
		return vmm_send(v, AL_G_FILES_GET, 0, 0, caps, 16);
	}
	v->phase = VMM_POWEROFF;
	return vmm_send(v, AL_G_POWEROFF, 0, 0, NULL, 0);
}

static int on_exit_msg(struct vmm *v, uint32_t id, const uint8_t *p, uint32_t len)
{
	size_t slot;
	struct vmm_exec *x = vmm_exec_find(v, id, &slot);
	if (!x || !x->started || x->exited)
		return vmm_proto(v, "EXIT for exec %u, which is not running", id);
	if (al_guest_exit_get(p, len, &x->exit) < 0)
		return vmm_proto(v, "EXIT with a bad payload");
	int st = x->exit.status;
	bool code = (st & 0x7f) == 0 && (st & ~0xff00) == 0;
	bool sig = (st & 0x7f) != 0 && (st & 0x7f) < 0x7f && (st & ~0xff) == 0;
	if (!code && !sig)
		return vmm_proto(v, "EXIT with wait status %#x", (unsigned)st);
	return exec_ended(v, x, slot);
}

static int on_log(struct vmm *v, const uint8_t *p, uint32_t len)
{
	char line[1100];
	size_t n = 0;
	/* LOG is outside the windows: a guest sending it without end would
	 * fill our stderr past the command's own flow control. The agent logs
	 * setup failures only; past VMM_LOG_LINES lines the rest are dropped. */
	if (++v->logs > VMM_LOG_LINES) {
		if (v->logs == VMM_LOG_LINES + 1 && !v->dry)
			dprintf(2,
				"airlock: microvm: guest: more than %u lines: the rest dropped\n",
				VMM_LOG_LINES);
		v->logs = VMM_LOG_LINES + 2; /* stays past the bound */
		return 0;
	}
	/* One line of printable text whatever the guest sent. */
	for (uint32_t i = 0; i < len && n < sizeof(line) - 1; i++)
		line[n++] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	line[n] = 0;
	if (!v->dry)
		dprintf(2, "airlock: microvm: guest: %s\n", line);
	return 0;
}

static int on_started(struct vmm *v, const struct al_guest_hdr *h, const uint8_t *p)
{
	size_t slot;
	struct vmm_exec *x = vmm_exec_find(v, h->id, &slot);
	if (!x || !x->sent || x->started)
		return vmm_proto(v, "EXEC_%s for exec %u, which was not asked for",
				 h->type == AL_G_EXEC_FAILED ? "FAILED" : "STARTED", h->id);
	if (h->len < 4 || (h->type == AL_G_EXEC_STARTED && h->len != 4))
		return vmm_proto(v, "EXEC_STARTED or EXEC_FAILED with a bad payload");
	uint32_t e = al_guest_get32(p);
	if (h->type == AL_G_EXEC_FAILED && v->cfg->session) {
		vmm_sess_failed(v, slot, e);
		return 0;
	}
	x->started = true;
	if (h->type == AL_G_EXEC_FAILED) {
		/* The shell's convention: 127 not found, 126 not runnable. */
		x->exit.status = (e == ENOENT ? 127 : 126) << 8;
		if (!v->dry)
			dprintf(2, "airlock: microvm: cannot run %s: %s\n", v->cfg->argv[0],
				strerror((int)(e < 4096 ? e : EIO)));
		return exec_ended(v, x, slot);
	}
	x->stdin_open = x->fd_in >= 0;
	if (v->cfg->session)
		vmm_sess_started(v, x, e);
	else
		v->t_started = vmm_now_us();
	return 0;
}

static int handle(struct vmm *v, const struct al_guest_hdr *h, const uint8_t *p)
{
	struct vmm_exec *x;
	v->last_rx_ms = v->now_ms;
	if (h->type != AL_G_HELLO && v->phase == VMM_BOOT && h->type != AL_G_LOG)
		return vmm_proto(v, "message type %u before HELLO", h->type);
	switch (h->type) {
	case AL_G_HELLO:
		return on_hello(v, p, h->len);
	case AL_G_LOG:
		return on_log(v, p, h->len);
	case AL_G_PONG:
		if (h->len != 8 || al_guest_get64(p) == 0 || al_guest_get64(p) > v->pings)
			return vmm_proto(v, "PONG for no PING");
		return 0;
	case AL_G_EXEC_STARTED:
	case AL_G_EXEC_FAILED:
		return on_started(v, h, p);
	case AL_G_STDOUT:
	case AL_G_STDERR:
		return on_output(v, h, p);
	case AL_G_EXIT:
		v->t_exit = vmm_now_us();
		return on_exit_msg(v, h->id, p, h->len);
	case AL_G_OPEN:
		return on_open(v, h->id, p, h->len);
	case AL_G_DATA:
	case AL_G_SHUT:
	case AL_G_CLOSE:
		return on_stream_msg(v, h, p);
	case AL_G_WINDOW:
		if (h->flags == 0)
			return on_stream_msg(v, h, p);
		x = vmm_exec_find(v, h->id, NULL);
		if (h->flags != 1 || !x || !x->started || h->len != 4)
			return vmm_proto(v, "WINDOW for no stdin");
		if (al_guest_get32(p) > AL_GUEST_WINDOW - x->stdin_credit)
			return vmm_proto(v, "WINDOW of stdin acknowledges more than was sent");
		x->stdin_credit += al_guest_get32(p);
		return 0;
	case AL_G_DGRAM:
		return on_dgram(v, h->id, p, h->len);
	case AL_G_FILE_BEGIN:
	case AL_G_FILE_DATA:
	case AL_G_FILE_END:
	case AL_G_FILES_DONE:
		if (h->type == AL_G_FILES_DONE && v->phase == VMM_FILES_ACK) {
			if (h->len != 4)
				return vmm_proto(v, "FILES_DONE with a bad payload");
			uint32_t e = al_guest_get32(p);
			if (e)
				return vmm_fail(v, "--copy-in: the guest could not write /work: %s",
						strerror(e < 4096 ? (int)e : EIO));
			return vmm_ready(v);
		}
		if (v->phase != VMM_FILES_OUT)
			return vmm_proto(v, "a file (message type %u) nobody asked for", h->type);
		if (h->type == AL_G_FILE_BEGIN)
			return vmm_file_begin(v, h->id, p, h->len);
		if (h->type == AL_G_FILE_DATA)
			return vmm_file_data(v, h->id, p, h->len);
		if (h->type == AL_G_FILE_END)
			return vmm_file_end(v, h->id);
		if (h->len != 4 || v->get.id)
			return vmm_proto(v, "FILES_DONE %s",
					 v->get.id ? "inside a file" : "with a bad payload");
		if (al_guest_get32(p) && !v->dry)
			dprintf(
			    2,
			    "airlock: microvm: --copy-out: the guest could not send all of /work: "
			    "%s\n",
			    strerror((int)(al_guest_get32(p) < 4096 ? al_guest_get32(p) : EIO)));
		v->phase = VMM_POWEROFF;
		return vmm_send(v, AL_G_POWEROFF, 0, 0, NULL, 0);
	}
	/* Every other type goes host → agent only. */
	return vmm_proto(v, "message type %u from the guest", h->type);
}

int vmm_handle_input(struct vmm *v)
{
	size_t off = 0;
	int r = 0;
	while (!v->failed && v->in_len - off >= AL_GUEST_HEADER && v->out.len < VMM_OUT_HARD) {
		struct al_guest_hdr h;
		if (al_guest_hdr_get(v->in + off, &h) < 0) {
			r = vmm_proto(v, "a bad frame header (type %u, flags %u, length %u)",
				      v->in[off], v->in[off + 1], al_guest_get32(v->in + off + 8));
			break;
		}
		if (v->in_len - off < AL_GUEST_HEADER + (size_t)h.len)
			break; /* the header's bound keeps the payload within VMM_IN_CAP */
		if (v->phase == VMM_POWEROFF && h.type != AL_G_LOG && h.type != AL_G_PONG) {
			/* After POWEROFF only crossing messages are expected; the
			 * stream ones are dropped, the rest refused. */
			if (h.type < AL_G_OPEN || h.type > AL_G_DGRAM)
				r = vmm_proto(v, "message type %u after POWEROFF", h.type);
		} else if (handle(v, &h, v->in + off + AL_GUEST_HEADER) < 0) {
			r = -1;
		}
		off += AL_GUEST_HEADER + h.len;
		if (r < 0)
			break;
	}
	memmove(v->in, v->in + off, v->in_len - off);
	v->in_len -= off;
	return v->failed ? -1 : r;
}

size_t vmm_feed(struct vmm *v, const uint8_t *p, size_t n)
{
	size_t room = sizeof(v->in) - v->in_len;
	if (n > room)
		n = room;
	memcpy(v->in + v->in_len, p, n);
	v->in_len += n;
	return n;
}
