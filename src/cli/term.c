/* airlock's own terminal while a run with a terminal (-t) holds it: raw
 * mode, so every key (^C, ^Z, ^D) reaches the sandbox's pty and its line
 * discipline decides; its size; and the way back, on every exit path. The
 * state is process-wide by nature (one terminal, one CLI), so it lives
 * here and not in the library. */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

#include "supervisor/ttyfilter.h"

/* What the terminal was before; read by the atexit and crash paths. */
static struct termios saved;
static int saved_fd = -1, reset_fd = -1;
static volatile sig_atomic_t raw_on;

/* kitty's keyboard protocol: its stack popped whole (a pop past its
 * depth empties it, and an empty stack has no flags), then the flags set
 * to none, for a program that set them without a push. Each screen has
 * its own stack: written before leaving the alternate screen and after. */
#define KITTY_KEYS_OFF "\033[<99u\033[=0;1u"

/* What a full-screen program killed mid-way leaves set in the terminal
 * emulator: every report it could turn on (mouse, focus events, resize
 * and colour-theme notifications, the locator: ttyfilter.h), bracketed
 * paste, a hidden cursor, the alternate screen, another character set,
 * colours, keyboard modes (kitty's flags, modifyOtherKeys, the keyboard
 * lock, local echo off). */
static const char reset[] =
    AL_TTY_REPORTS_OFF "\033[?2004l\033[?25h" KITTY_KEYS_OFF
		       "\033[?1049l\033(B\033[0m" KITTY_KEYS_OFF "\033[>4m\033[2l\033[12h";

void al_cli_term_restore(void)
{
	if (!raw_on)
		return;
	raw_on = 0;
	/* TCSANOW: a reader that stopped reading (^S) must not hold us.
	 * What is still unread was typed for the sandbox, or is a terminal's
	 * answer to what the sandbox wrote: the shell after us must not
	 * read it. */
	while (tcsetattr(saved_fd, TCSANOW, &saved) < 0 && errno == EINTR)
		;
	if (reset_fd >= 0)
		(void)!write(reset_fd, reset, sizeof(reset) - 1);
	tcflush(saved_fd, TCIFLUSH);
}

/* airlock itself crashed: the terminal first, then the signal's own end.
 * tcsetattr is async-signal-safe. */
static void on_crash(int sig)
{
	al_cli_term_restore();
	raise(sig); /* SA_RESETHAND: the default action now */
}

/* a and b are one terminal: both terminals, the same device. */
static bool same_terminal(int a, int b)
{
	struct stat sa, sb;

	return isatty(a) && isatty(b) && fstat(a, &sa) == 0 && fstat(b, &sb) == 0 &&
	       S_ISCHR(sa.st_mode) && S_ISCHR(sb.st_mode) && sa.st_rdev == sb.st_rdev;
}

int al_cli_term_raw(int fd, struct al_error *err)
{
	/* Every signal whose default ends airlock and that the run's
	 * signalfd does not take (those end the run the normal way). */
	static const int crashes[] = {SIGSEGV, SIGBUS,	  SIGFPE,    SIGILL,  SIGABRT, SIGUSR1,
				      SIGUSR2, SIGALRM,	  SIGXCPU,   SIGXFSZ, SIGSYS,  SIGTRAP,
				      SIGPROF, SIGVTALRM, SIGSTKFLT, SIGIO,   SIGPWR};
	static bool registered;
	struct sigaction sa = {.sa_handler = on_crash, .sa_flags = SA_RESETHAND | SA_NODEFER};
	struct termios raw;

	if (tcgetattr(fd, &saved) < 0)
		return al_error_setsys(err, errno, "reading the terminal's mode (tcgetattr)");
	saved_fd = fd;
	if (!registered && atexit(al_cli_term_restore) != 0)
		return al_error_set(err, ENOMEM, "atexit");
	registered = true;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(crashes) / sizeof(crashes[0]); i++)
		sigaction(crashes[i], &sa, NULL);
	for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
		sigaction(sig, &sa, NULL);
	/* The resets go only to the terminal set raw here, when our stdout
	 * is that terminal: what the sandbox wrote to it is what they undo.
	 * A stdout that is a pipe, a file or another terminal (a transcript
	 * being captured) gets nothing added: it was not changed. */
	reset_fd = same_terminal(STDOUT_FILENO, fd) ? STDOUT_FILENO : -1;
	raw = saved;
	cfmakeraw(&raw);
	raw_on = 1;
	if (tcsetattr(fd, TCSANOW, &raw) < 0) {
		int e = errno;
		raw_on = 0;
		return al_error_setsys(err, e, "setting the terminal to raw mode (tcsetattr)");
	}
	return 0;
}

bool al_cli_term_size(int fd, unsigned short *ret_rows, unsigned short *ret_cols)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		return false;
	*ret_rows = ws.ws_row;
	*ret_cols = ws.ws_col;
	return true;
}
