/* The session command's stderr to the log (cmdlog.h). */
#include "oci/cmdlog.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/loop.h"

void al_oci_cmdlog_init(struct al_oci_cmdlog *l, const char *id)
{
	int p[2];

	*l = (struct al_oci_cmdlog){.id = id, .rd = -1, .wr = -1};
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0) {
		l->rd = p[0];
		l->wr = p[1];
	}
}

static void line_out(struct al_oci_cmdlog *l)
{
	if (l->len)
		al_warn("container %s: %.*s", l->id, (int)l->len, l->line);
	l->len = 0;
}

/* What the pipe holds now, a line at a time. */
static void on_read(struct al_watch *w, uint32_t events, void *data)
{
	struct al_oci_cmdlog *l = data;
	char buf[1024];
	ssize_t n;

	(void)w;
	(void)events;
	while ((n = read(l->rd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] == '\n' || l->len == sizeof(l->line)) {
				line_out(l);
				if (buf[i] == '\n')
					continue;
			}
			l->line[l->len++] = buf[i] >= 0x20 && buf[i] < 0x7f ? buf[i] : '?';
		}
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		line_out(l);
		al_watch_removep(&l->w);
		al_closep(&l->rd);
	}
}

void al_oci_cmdlog_watch(struct al_oci_cmdlog *l, struct al_loop *loop)
{
	if (l->rd >= 0)
		l->w = al_loop_add(loop, l->rd, EPOLLIN, on_read, l);
}

void al_oci_cmdlog_end(struct al_oci_cmdlog *l)
{
	if (l->rd >= 0)
		on_read(l->w, EPOLLIN, l);
	line_out(l);
	al_watch_removep(&l->w);
	al_closep(&l->rd);
}

void al_oci_cmdlog_free(struct al_oci_cmdlog *l)
{
	al_closep(&l->wr);
}
