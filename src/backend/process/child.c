/* The process backend's child: the native steps that need no namespace, in
 * this order, then the native init (which, as the run's own uid, kills
 * with kill(-1) exactly the run's processes at the end).
 *
 * - The ids change before landlock and seccomp, and groups go first
 *   (setgroups needs CAP_SETGID, which the uid change drops).
 * - The subreaper bit makes orphans (a daemonised grandchild) init's, so
 *   init reaps them and its final kill loop ends only once they are gone.
 * - The socket filter and the filter of refused calls come before the
 *   native seccomp filter: once that one is in, seccomp(2) itself is
 *   refused. */
#include "backend/process/process.h"

#include <errno.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backend/native/state.h"
#include "backend/native/steps.h"
#include "core/cleanup.h"
#include "core/sys.h"
#include "core/util.h"

static int fail(struct al_child *c, int e, const char *what)
{
	snprintf(c->msg, sizeof(c->msg), "%s", what);
	return -e;
}

static int step_subreaper(struct al_child *c)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		return fail(c, errno, "prctl(PR_SET_CHILD_SUBREAPER)");
	return 0;
}

static int step_no_groups(struct al_child *c)
{
	if (setgroups(0, NULL) < 0)
		return fail(c, errno, "setgroups(0)");
	return 0;
}

#if defined(__x86_64__)
#define PROCESS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define PROCESS_ARCH AUDIT_ARCH_AARCH64
#endif

#define ARG_LO(n) (offsetof(struct seccomp_data, args) + 8 * (n))
#define DENY(e)	  (SECCOMP_RET_ERRNO | (e))

/* Without a network namespace every socket reaches the host's: only TCP
 * (which landlock then refuses but for the ports the plan allows) and
 * connected pairs of stream sockets. No UDP, raw, packet, netlink or Unix
 * socket (a Unix socket could reach any host socket by path or abstract
 * name; a datagram pair could send to one). A stream socket's protocol
 * must be 0 or TCP: SCTP and MPTCP also make SOCK_STREAM sockets, and
 * landlock's network rules hold TCP alone. Other architectures are the
 * native filter's to kill. */
static const struct sock_filter socket_filter[] = {
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROCESS_ARCH, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socket, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_socketpair, 13, 0),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    /* socket: AF_INET or AF_INET6, SOCK_STREAM */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(0)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET, 2, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AF_INET6, 1, 0),
    BPF_STMT(BPF_RET | BPF_K, DENY(EAFNOSUPPORT)),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 0, 4),
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(2)),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, IPPROTO_TCP, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET | BPF_K, DENY(EACCES)),
    /* socketpair: stream or seqpacket (connected for good) */
    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG_LO(1)),
    BPF_STMT(BPF_ALU | BPF_AND | BPF_K, 0xf),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_STREAM, 1, 0),
    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOCK_SEQPACKET, 0, 1),
    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    BPF_STMT(BPF_RET | BPF_K, DENY(EACCES)),
};

static int step_sockets(struct al_child *c)
{
	struct sock_fprog prog = {.len = AL_ARRAY_SIZE(socket_filter),
				  .filter = (struct sock_filter *)socket_filter};

	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return fail(c, errno, "installing the socket filter");
	return 0;
}

/* Calls refused here that the native table allows because, there, a
 * namespace makes them harmless:
 * - listen: an unbound TCP socket's listen() binds it to an ephemeral
 *   port on every address without landlock's bind check, so a run could
 *   serve whoever connects from the host or the network (with no gateway
 *   there is no nftables table either). The layer has no loopback of its
 *   own, so it offers no TCP server at all; its socketpairs need none.
 * - System V IPC and POSIX message queues: there is no IPC namespace, so
 *   an object would be the host's: it outlives the run (its scratch is not
 *   the only thing destroyed then), and the next run given the same slot's
 *   uid would find it. The host's own objects stay out of reach too. */
static const struct {
	int nr, err;
} refused[] = {
    {__NR_listen, EACCES}, {__NR_shmget, EPERM},    {__NR_shmat, EPERM},      {__NR_shmctl, EPERM},
    {__NR_semget, EPERM},  {__NR_semop, EPERM},	    {__NR_semtimedop, EPERM}, {__NR_semctl, EPERM},
    {__NR_msgget, EPERM},  {__NR_msgsnd, EPERM},    {__NR_msgrcv, EPERM},     {__NR_msgctl, EPERM},
    {__NR_mq_open, EPERM}, {__NR_mq_unlink, EPERM},
};

/* Two instructions a call: "nr equal? then (the next one) refuse it". */
static int step_refused(struct al_child *c)
{
	struct sock_filter f[4 + 2 * AL_ARRAY_SIZE(refused) + 1];
	size_t n = 0;

	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, arch));
	f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PROCESS_ARCH, 1, 0);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
					      offsetof(struct seccomp_data, nr));
	for (size_t i = 0; i < AL_ARRAY_SIZE(refused); i++) {
		f[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
						      (uint32_t)refused[i].nr, 0, 1);
		f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, DENY(refused[i].err));
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);

	struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return fail(c, errno, "installing the filter of listen and IPC");
	return 0;
}

struct step {
	const char *name;
	int (*run)(struct al_child *c);
};

/* clang-format off */
static const struct step steps[] = {
	{"die-with-parent",  step_die_with_parent},
	{"wait-for-parent",  step_wait_parent},
	{"cgroup",           step_cgroup_namespace},
	{"stdio",            step_stdio},
	{"subreaper",        step_subreaper},
	{"rlimits",          step_rlimits},
	{"close-fds",        step_close_fds},
	{"new-session",      step_new_session},
	{"no-groups",        step_no_groups},
	{"drop-privileges",  step_drop_privileges},
	{"no-new-privs",     step_no_new_privs},
	{"landlock",         step_landlock},
	{"sockets",          step_sockets},
	{"refused",          step_refused},
	{"seccomp",          step_seccomp},
	{"verify",           step_report_ready},
};
/* clang-format on */

_Noreturn void al_process_child(const struct al_process *pr, const struct al_child_fds *fds,
				uid_t uid, gid_t gid)
{
	struct al_child c = {
	    .plan = &pr->view, .np = pr->np, .fds = fds, .sync = fds->sync, .uid = uid, .gid = gid};

	umask(0);
	for (size_t i = 0; i < AL_ARRAY_SIZE(steps); i++) {
		int r = steps[i].run(&c);
		if (r < 0) {
			al_child_send(c.sync, AL_SYNC_ERROR, -r, 0, steps[i].name, c.msg, -1);
			_exit(125);
		}
	}
	al_sandbox_init(&pr->view, c.sync, c.cg_leave, c.n_cg);
}

/* A line "Key:\tvalue" of /proc/PID/status. */
static bool field(const char *status, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);

	for (const char *s = status; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
		if (strncmp(s, key, k) == 0 && s[k] == ':') {
			s += k + 1;
			s += strspn(s, " \t");
			snprintf(out, len, "%.*s", (int)strcspn(s, "\n"), s);
			return true;
		}
	return false;
}

/* From outside, before the command starts: init runs as the run's ids,
 * with no capability, no_new_privs, seccomp and the landlock ABI lowered. */
int al_process_check_ready(struct al_sandbox *sb, int landlock_abi, char *msg, size_t len)
{
	const struct al_process *pr = sb->state->process;
	char path[64], status[4096], v[128], want[128];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)sb->state->pid);
	n = al_read_file(path, status, sizeof(status) - 1);
	if (n <= 0) {
		snprintf(msg, len, "reading %s", path);
		return -1;
	}
	status[n] = '\0';
	snprintf(want, sizeof(want), "%u\t%u\t%u\t%u", (unsigned)sb->ids.uid, (unsigned)sb->ids.uid,
		 (unsigned)sb->ids.uid, (unsigned)sb->ids.uid);
	const struct {
		const char *key, *want;
	} rows[] = {{"Uid", want},
		    {"CapEff", "0000000000000000"},
		    {"CapPrm", "0000000000000000"},
		    {"CapBnd", "0000000000000000"},
		    {"NoNewPrivs", "1"},
		    {"Seccomp", "2"}};
	for (size_t i = 0; i < AL_ARRAY_SIZE(rows); i++)
		if (!field(status, rows[i].key, v, sizeof(v)) || strcmp(v, rows[i].want) != 0) {
			snprintf(msg, len, "init's %s is \"%s\", not \"%s\"", rows[i].key, v,
				 rows[i].want);
			return -1;
		}
	if (landlock_abi != pr->np->landlock_abi) {
		snprintf(msg, len, "landlock ABI %d in force, %d wanted", landlock_abi,
			 pr->np->landlock_abi);
		return -1;
	}
	return 0;
}
