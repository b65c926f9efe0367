/* The supervisor's state, shared by supervisor.c and stdio.c (internal to
 * src/supervisor). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/loop.h"
#include "gateway/process.h"
#include "supervisor/meter.h"
#include "supervisor/relay.h"
#include "supervisor/supervisor.h"
#include "supervisor/ttyfilter.h"

/* Where the sandbox's stdout or stderr goes: ours. Written without
 * blocking, so a reader that stops reading (a paused terminal, a full
 * pipe) cannot stall the loop and with it the timeout and the limits:
 * what does not fit waits in pending, and the sandbox's pipe is not read
 * until it is out (its writer then blocks, as it would outside). */
struct al_supervisor;

struct out {
	struct al_supervisor *l;
	int which;	    /* 0: stdout, 1: stderr */
	struct al_watch *w; /* fd, while what is pending waits for room */
	int fd;		    /* ours: 1 or 2, or a non-blocking reopening of it */
	bool own_fd;	    /* fd is that reopening (closed at the end) */
	bool socket;	    /* send(MSG_DONTWAIT) instead */
	bool can_poll;
	bool discard; /* no fd and no callback: counted, then dropped */
	char *pending;
	size_t pend_off, pend_len;
};

struct al_supervisor {
	struct al_loop *ev; /* borrowed */
	const struct al_plan *plan;
	struct al_audit *audit;
	char run_id[64];      /* told to the gateway (for the operator's decider) */
	struct al_cred *cred; /* the run's credentials (borrowed), or NULL */
	uint64_t spent_told;  /* the budget: the last CPU and memory cost told the gateway */
	struct al_supervisor_io io;
	bool confine_self;
	bool session; /* a session: the scratch is kept for its file operations */
	bool held;    /* a pool's: its gateway held until claimed */
	int confine_dirfd;
	int confine_ruleset; /* our own landlock ruleset, until applied */
	uint64_t start_ms;
	struct al_run_result result;
	struct al_meter meter;
	struct al_sandbox_events events; /* what the backend calls */
	struct al_sandbox_ctl ctl;	 /* what we call */
	bool attached;
	struct al_timer *timer; /* the wall clock */
	/* clock.c: when the run's deadline falls (al_now_ms; 0 none), and
	 * since when it is paused (0: running): a pause moves the deadline. */
	uint64_t deadline_ms, paused_at, paused_ms;
	/* the egress gateway's process, forked before the sandbox is made
	 * (or at the child's first listener), and whether it has one */
	struct al_gateway_proc *gw;
	bool gw_listening;
	struct al_gateway_proc_events gateway_events;
	bool release_waits;   /* ready, but the gateway has not reported its start yet */
	bool finishing;	      /* al_supervisor_finish runs: nothing more is released */
	bool warned_blocking; /* an output fd could not be made non-blocking: said once */
	/* the command's stdio: our ends as the backend handed them over, until
	 * the relay takes them (al_sup_stdio_start, al_sup_stdio_terminal) */
	int stdin_wr, stdout_rd, stderr_rd;
	struct al_relay relay;	  /* its output read, capped, filtered; its stdin queue */
	struct al_watch *w_stdin; /* io.stdin_fd */
	struct out out[2];	  /* where stdout and stderr go */
	bool stdin_poll;	  /* stdin is pollable; else copied when the pipe has room */
	bool in_waiting;	  /* what was read waits for room in the sandbox's stdin */
	bool in_eof;		  /* tty: stdin ended, its ^D is being typed */
	int tty_fd;   /* tty: the pty's master (the relay reads and writes dups of it) */
	int tty_peer; /* tty, stdin not a terminal: a slave, until the ^D is typed */
	/* (the relay's src[i].filtered: our stdout, stderr is a terminal, and
	 * what the sandbox writes there is re-encoded with only what acts on
	 * the screen, ttyfilter.h) */
	struct al_timer *eof_timer; /* looks at what the command has not read yet */
	bool eof_quiet;		    /* at the last look it had read everything */
	unsigned eof_lflag;	    /* the pty's c_lflag at the last look */
	unsigned eof_typed;	    /* ^Ds typed so far */
	unsigned eof_looks;	    /* looks so far (the timer slows down after a while) */
	unsigned eof_typed_lflag;   /* the pty's c_lflag when the last ^D was typed */
	bool eof_raw_seen;	    /* the pty was seen out of line mode (a line editor) */
	bool eof_pending;	    /* a ^D typed in line mode, not yet seen read */
	uint64_t eof_canon_ms;	    /* since when the pty has been seen in line mode */
	uint64_t eof_next_ms;	    /* no ^D typed in line mode before this */
	unsigned eof_backs;	    /* ^Ds taken back so far */
	unsigned short rows, cols;  /* tty: the size it gets */
	bool gone;		    /* the sandbox is gone */
	bool running;		    /* the command was started */
	bool released;		    /* the sandbox was told to start the command */
	int scratch_fd;		    /* the scratch's root from the backend, for --copy-out */
	int *out_fds;		    /* each --copy-out's HOSTDIR, opened at attach */
	bool have_status;
	int status;
	int stop_signals; /* how many SIGINT/SIGTERM we were sent */
};

/* supervisor.c */
void al_sup_stop(struct al_supervisor *l);

/* stdio.c */
#define AL_SUP_STDIN_CHUNK 65536 /* read from our stdin at once, and waiting at most */
void al_sup_stdio_init(struct al_supervisor *l);
int al_sup_stdio_start(struct al_supervisor *l, struct al_error *err);
/* The command's output is all read (or its pipes were never handed over). */
bool al_sup_stdio_drained(const struct al_supervisor *l);
/* tty: take over the pty's master fd (closed at the end) and relay it. */
int al_sup_stdio_terminal(struct al_supervisor *l, int fd, struct al_error *err);
/* tty: the command is gone; the slave we held to time the ^D goes. */
void al_sup_stdio_exited(struct al_supervisor *l);
/* tty: give the pty l->rows x l->cols. */
void al_sup_stdio_resize(struct al_supervisor *l);
void al_sup_stdio_close(struct al_supervisor *l);
