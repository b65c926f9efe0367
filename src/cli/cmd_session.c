/* The hidden `airlock __session` and `__front` verbs. `__session` is one
 * sandbox's process of the daemon (serve/session.c), exec'd by the monitor
 * with its socket at fd 3: the static airlock that started the daemon (it
 * needs no libmicrohttpd, and a static binary's pages are shared by every
 * session instead of each relocating its own copy of the shared libraries'
 * data, about 800 KiB), else airlock-serve itself. Its request becomes a
 * plan through the request layer, as `airlock run`'s does; the operator
 * policy's location is the monitor's (--operator-policy, passed in the
 * request), else $AIRLOCK_OPERATOR_POLICY as this process finds it.
 * `__front` is the daemon's HTTP front (airlock-serve only, below). */
#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/log.h"

#include "policy/operator.h"
#include "serve/serve.h"

int al_cmd_session(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return al_session_main(3, getenv(AL_OPERATOR_ENV));
}

#ifdef AL_SERVE_BINARY /* the front links libmicrohttpd: not in the static airlock */
/* The hidden `airlock __front MAX_CLIENTS CLIENT_TIMEOUT REQUEST_TIMEOUT
 * FIRST_REQUEST NO_LANDLOCK` (airlock-serve only): the daemon's HTTP front
 * (serve/api/front.c), exec'd by the monitor with its channel at fd 3, an
 * empty environment and nothing else open; every argument a number. */
static int front_number(const char *s, unsigned long long max, unsigned long long *ret)
{
	char *end;

	errno = 0;
	*ret = strtoull(s, &end, 10);
	return !*s || *end || errno || *ret > max ? -1 : 0;
}

int al_cmd_front(int argc, char **argv)
{
	unsigned long long v[5];
	static const unsigned long long max[5] = {100000, 100000, 100000, UINT64_MAX / 2, 1};

	if (argc != 5) {
		al_err("__front: expected 5 numbers, got %d arguments", argc);
		return 125;
	}
	for (int i = 0; i < 5; i++)
		if (front_number(argv[i], max[i], &v[i]) < 0) {
			al_err("__front: argument %d \"%s\" is not a number up to %llu", i + 1,
			       argv[i], max[i]);
			return 125;
		}
	struct al_front_config cfg = {.max_clients = (unsigned)v[0],
				      .client_timeout_s = (unsigned)v[1],
				      .request_timeout_s = (unsigned)v[2],
				      .first_request = v[3],
				      .no_landlock = v[4] == 1};
	al_front_main(3, &cfg);
}
#endif
