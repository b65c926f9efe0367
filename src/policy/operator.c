/* The operator policy: its model's lifetime, finding and loading the file.
 * The parser is operator-parse.c. */
#include "policy/operator.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

struct al_decider_conf *al_decider_conf_dup(const struct al_decider_conf *c)
{
	struct al_decider_conf *d;

	if (!c)
		return NULL;
	d = xcalloc(1, sizeof(*d));
	*d = *c;
	d->socket = c->socket ? xstrdup(c->socket) : NULL;
	d->host = c->host ? xstrdup(c->host) : NULL;
	d->run_path = c->run_path ? xstrdup(c->run_path) : NULL;
	d->egress_path = c->egress_path ? xstrdup(c->egress_path) : NULL;
	d->where = c->where ? xstrdup(c->where) : NULL;
	return d;
}

void al_decider_conf_free(struct al_decider_conf *c)
{
	if (!c)
		return;
	free(c->socket);
	free(c->host);
	free(c->run_path);
	free(c->egress_path);
	free(c->where);
	free(c);
}
