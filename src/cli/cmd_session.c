/* The hidden `airlock __session` verb: one sandbox's process of the
 * daemon (serve/session.c), exec'd by the monitor with its socket at fd 3:
 * the static airlock that started the daemon (it needs no libmicrohttpd,
 * and a static binary's pages are shared by every session instead of each
 * relocating its own copy of the shared libraries' data, about 800 KiB),
 * else airlock-serve itself. Its request becomes a plan through the request
 * layer, as `airlock run`'s does; the operator policy's location is the
 * monitor's (--operator-policy, passed in the request), else
 * $AIRLOCK_OPERATOR_POLICY as this process finds it. */
#include "cli.h"

#include <stdlib.h>

#include "policy/operator.h"
#include "serve/serve.h"

int al_cmd_session(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	return al_session_main(3, getenv(AL_OPERATOR_ENV));
}
