#include "backend/backend.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/sys.h"
#include "gateway/gateway.h"

const struct al_backend_ops *al_backend_lookup(const char *name)
{
	if (!name || strcmp(name, al_backend_native.name) == 0)
		return &al_backend_native;
	return NULL;
}

void al_sandbox_release(struct al_sandbox *sb)
{
	struct al_supervised *p = &sb->proc;
	siginfo_t si;

	/* An init that reported the end holds no other process and is already
	 * in exit(): reap it if done, else leave the zombie to our own exit
	 * (the CLI) or a later waitid on the pidfd. Anything else is killed
	 * and waited for, which waits for the whole pid namespace. */
	if (p->pidfd >= 0 && p->exiting) {
		waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED | WNOHANG);
	} else if (p->pidfd >= 0 && al_sys_pidfd_send_signal(p->pidfd, SIGKILL) == 0) {
		while (waitid(P_PIDFD, (id_t)p->pidfd, &si, WEXITED) < 0 && errno == EINTR)
			;
	}
	if (p->rules_helper > 0) {
		/* Setup failed before the rules were waited for. */
		struct al_error ignored = {0};
		al_gateway_rules_wait(p->rules_helper, p->rules_errfd, &ignored);
		p->rules_helper = 0;
	}
	al_closep(&p->pidfd);
	al_closep(&p->sync);
	al_closep(&p->stdin_wr);
	al_closep(&p->stdout_rd);
	al_closep(&p->stderr_rd);
}
