/* The monitor's answers: to the front's requests over its channel (a
 * status and a body, or chunks of a streamed one), and the fixed refusal
 * it writes itself on a client's socket it will not hand to the front. */
#include "serve/internal.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

void al_serve_respond(struct al_chan *front, uint64_t req, unsigned status, const char *ctype,
		      const char *body, size_t len)
{
	struct al_msg_out o;

	if (front->fd < 0)
		return; /* no front runs: its clients are gone */
	al_msg_begin(&o, AL_MSG_RESPONSE, req);
	al_msg_put_u32(&o, AL_TAG_STATUS, status);
	al_msg_put_str(&o, AL_TAG_CTYPE, ctype);
	al_msg_put_bytes(&o, AL_TAG_BODY, body, len);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		static const char big[] = "{\"error\":\"the answer is too large to send\"}";
		al_msg_begin(&o, AL_MSG_RESPONSE, req);
		al_msg_put_u32(&o, AL_TAG_STATUS, 500);
		al_msg_put_str(&o, AL_TAG_CTYPE, "application/json");
		al_msg_put_bytes(&o, AL_TAG_BODY, big, sizeof(big) - 1);
		al_msg_end(&o);
	}
	al_chan_queue(front, &o, -1);
}

void al_serve_respond_json(struct al_chan *front, uint64_t req, unsigned status, json_t *o)
{
	/* o is NULL when it could not be packed (text that is not UTF-8):
	 * the client gets a 500 with a fixed message, never a crash. */
	static const char failed[] = "{\"error\":\"the answer could not be encoded\"}";
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (!s)
		status = 500;
	al_serve_respond(front, req, status, "application/json", s ? s : failed,
			 s ? strlen(s) : sizeof(failed) - 1);
	free(s);
	json_decref(o);
}

void al_serve_chunk(struct al_chan *front, uint64_t req, const void *p, size_t len, bool end)
{
	struct al_msg_out o;

	if (front->fd < 0)
		return;
	al_msg_begin(&o, AL_MSG_CHUNK, req);
	al_msg_put_bytes(&o, AL_TAG_BODY, p, len);
	if (end)
		al_msg_put_u32(&o, AL_TAG_END, 1);
	if (al_msg_end(&o) < 0) {
		free(o.buf);
		return;
	}
	al_chan_queue(front, &o, -1);
}

void al_serve_refuse(int fd, unsigned status, const char *phrase, const char *error)
{
	json_t *o = json_pack("{s:s}", "error", error);
	char *body = json_dumps(o, JSON_COMPACT), head[256];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\n%sConnection: close\r\n\r\n",
			 status, phrase, body ? strlen(body) : 0,
			 status == 429 || status == 503 ? "Retry-After: 1\r\n" : "");
	/* Without reading what the client sent, and without waiting; head and
	 * body in one sendmsg, so that a client's first read has both. */
	if (body && n > 0 && (size_t)n < sizeof(head)) {
		struct iovec iov[2] = {{head, (size_t)n}, {body, strlen(body)}};
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
		(void)sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	free(body);
	json_decref(o);
	/* What the client already sent is read away (without waiting, 64 KiB
	 * at most): a close with unread bytes resets the connection, and the
	 * client could lose the answer. */
	char sink[4096];
	for (int i = 0; i < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	close(fd);
}
