/* The fake-address map: the DNS stub answers each allowed name with its own
 * address from AL_GATEWAY_FAKE_NET, and a transparent connection to one is
 * mapped back to the name. A name is found in constant time however many a
 * wildcard rule let the sandbox ask for. */
#include "gateway/conn.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return h;
}

/* The slot for name: where it is, or the empty one where it would go. */
static size_t fake_slot(const struct al_gateway *gw, const char *name)
{
	size_t mask = gw->n_slots - 1, i = (size_t)name_hash(name) & mask;

	while (gw->fake_slots[i] && strcmp(gw->fake_names[gw->fake_slots[i] - 1], name) != 0)
		i = (i + 1) & mask;
	return i;
}

static void fake_grow(struct al_gateway *gw)
{
	free(gw->fake_slots);
	gw->n_slots = gw->n_slots ? gw->n_slots * 2 : 256;
	gw->fake_slots = xcalloc(gw->n_slots, sizeof(*gw->fake_slots));
	for (size_t i = 0; i < gw->n_fake; i++)
		gw->fake_slots[fake_slot(gw, gw->fake_names[i])] = (uint32_t)i + 1;
}

bool gw_fake_addr(struct al_gateway *gw, const char *name, struct in6_addr *ret)
{
	uint8_t v4[4];
	size_t slot, i;

	if (2 * (gw->n_fake + 1) > gw->n_slots)
		fake_grow(gw);
	slot = fake_slot(gw, name);
	if (gw->fake_slots[slot]) {
		i = gw->fake_slots[slot] - 1;
	} else {
		if (gw->n_fake >= AL_GATEWAY_FAKE_MAX)
			return false;
		if (gw->n_fake == gw->cap_fake) {
			gw->cap_fake = gw->cap_fake ? 2 * gw->cap_fake : 64;
			gw->fake_names = xrealloc(gw->fake_names, gw->cap_fake * sizeof(char *));
		}
		i = gw->n_fake++;
		gw->fake_names[i] = xstrdup(name);
		gw->fake_slots[slot] = (uint32_t)i + 1;
	}
	uint32_t a = AL_GATEWAY_FAKE_NET + (uint32_t)i + 1;
	v4[0] = (uint8_t)(a >> 24);
	v4[1] = (uint8_t)(a >> 16);
	v4[2] = (uint8_t)(a >> 8);
	v4[3] = (uint8_t)a;
	al_addr_from_ipv4(v4, ret);
	return true;
}

const char *gw_fake_name(const struct al_gateway *gw, uint32_t a)
{
	if (a > AL_GATEWAY_FAKE_NET && a - AL_GATEWAY_FAKE_NET <= gw->n_fake)
		return gw->fake_names[a - AL_GATEWAY_FAKE_NET - 1];
	return NULL;
}

void gw_fake_free(struct al_gateway *gw)
{
	for (size_t i = 0; i < gw->n_fake; i++)
		free(gw->fake_names[i]);
	free(gw->fake_names);
	free(gw->fake_slots);
	gw->fake_names = NULL;
	gw->fake_slots = NULL;
	gw->n_fake = gw->cap_fake = gw->n_slots = 0;
}
