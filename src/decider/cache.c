/* The decider's answers kept (decider.h): a hash table of at most size
 * entries with a most-recently-used list through them; the least recently
 * used one makes room, and an entry past its time is dropped when it is
 * looked up. */
#include "decider/decider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/sys.h"
#include "core/util.h"

struct entry {
	struct entry *hnext;	   /* in its bucket */
	struct entry *prev, *next; /* most recently used first */
	uint64_t at;
	bool allow;
	char reason[AL_DECIDER_REASON_MAX + 1];
	bool has_reason;
	char key[]; /* NUL-terminated */
};

/* Longest chain a bucket may grow to: past it a new key is not cached
 * (asked again next time), so no key costs more than this many compares. */
#define CHAIN_MAX 8

struct al_decider_cache {
	unsigned size, n;
	uint64_t seed;
	uint64_t ttl_ms;
	struct entry **buckets;
	size_t n_buckets; /* a power of two, at least twice size */
	struct entry *head, *tail;
};

/* FNV-1a from a random start, then mixed: the sandbox chooses the keys
 * (the paths it asks for), and must not be able to put them all in one
 * bucket. */
static uint64_t hash(uint64_t seed, const char *s)
{
	uint64_t h = 1469598103934665603ull ^ seed;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ull;
	h ^= seed >> 17;
	h *= 0xbf58476d1ce4e5b9ull; /* a final mix, so the seed reaches every bit */
	h ^= h >> 31;
	return h;
}

struct al_decider_cache *al_decider_cache_new(unsigned size, uint64_t ttl_ms)
{
	struct al_decider_cache *c;

	if (size == 0 || ttl_ms == 0)
		return NULL;
	c = xcalloc(1, sizeof(*c));
	c->size = size < AL_DECIDER_CACHE_MAX ? size : AL_DECIDER_CACHE_MAX;
	c->ttl_ms = ttl_ms;
	c->n_buckets = 16;
	while (c->n_buckets < 2 * (size_t)c->size)
		c->n_buckets *= 2;
	c->buckets = xcalloc(c->n_buckets, sizeof(*c->buckets));
	if (getrandom(&c->seed, sizeof(c->seed), 0) != sizeof(c->seed))
		c->seed = al_now_ms() ^ (uint64_t)(uintptr_t)c;
	return c;
}

unsigned al_decider_cache_count(const struct al_decider_cache *c)
{
	return c ? c->n : 0;
}

static void unlink_lru(struct al_decider_cache *c, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void push_front(struct al_decider_cache *c, struct entry *e)
{
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

/* key's place in its chain (the end when absent); *ret_len: the entries
 * passed on the way. */
static struct entry **slot(struct al_decider_cache *c, const char *key, size_t *ret_len)
{
	struct entry **pp = &c->buckets[hash(c->seed, key) & (c->n_buckets - 1)];
	size_t n = 0;

	while (*pp && strcmp((*pp)->key, key) != 0) {
		pp = &(*pp)->hnext;
		n++;
	}
	if (ret_len)
		*ret_len = n;
	return pp;
}

static void drop(struct al_decider_cache *c, struct entry **pp)
{
	struct entry *e = *pp;

	*pp = e->hnext;
	unlink_lru(c, e);
	c->n--;
	free(e);
}

bool al_decider_cache_get(struct al_decider_cache *c, const char *key, uint64_t now_ms,
			  bool *ret_allow, const char **ret_reason)
{
	struct entry **pp, *e;

	if (!c || strlen(key) > AL_DECIDER_KEY_MAX)
		return false;
	pp = slot(c, key, NULL);
	if (!(e = *pp))
		return false;
	if (now_ms < e->at || now_ms - e->at >= c->ttl_ms) {
		drop(c, pp);
		return false;
	}
	unlink_lru(c, e);
	push_front(c, e);
	*ret_allow = e->allow;
	if (ret_reason)
		*ret_reason = e->has_reason ? e->reason : NULL;
	return true;
}

void al_decider_cache_put(struct al_decider_cache *c, const char *key, uint64_t now_ms, bool allow,
			  const char *reason)
{
	size_t len;
	struct entry **pp, *e;

	if (!c || (len = strlen(key)) > AL_DECIDER_KEY_MAX)
		return;
	size_t chain;
	pp = slot(c, key, &chain);
	if ((e = *pp)) {
		unlink_lru(c, e);
	} else {
		if (chain >= CHAIN_MAX)
			return;
		if (c->n == c->size) {
			struct entry **old = slot(c, c->tail->key, NULL);
			drop(c, old);
			pp = slot(c, key, NULL); /* the chain may have changed */
		}
		e = xcalloc(1, sizeof(*e) + len + 1);
		memcpy(e->key, key, len + 1);
		e->hnext = *pp;
		*pp = e;
		c->n++;
	}
	e->at = now_ms;
	e->allow = allow;
	e->has_reason = reason != NULL;
	snprintf(e->reason, sizeof(e->reason), "%s", reason ? reason : "");
	push_front(c, e);
}

void al_decider_cache_free(struct al_decider_cache *c)
{
	if (!c)
		return;
	while (c->head) {
		struct entry *e = c->head;
		c->head = e->next;
		free(e);
	}
	free(c->buckets);
	free(c);
}
