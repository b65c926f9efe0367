#include "gateway/needles.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"

/* A multi-pattern Horspool scan over 2-byte blocks (after Wu and Manber):
 * a window of min_len bytes slides along the text; the block at its end
 * says how far it may jump (no needle's first min_len bytes hold that
 * block nearer their end), or, at 0, which needles end their first
 * min_len bytes with it and are compared in full. Placeholders are long,
 * so most windows jump by min_len - 1. */
#define BLOCKS 65536

struct al_needles {
	size_t n, max_len, min_len;
	char **v;
	size_t *len;
	uint8_t shift[BLOCKS];
	uint8_t first[BLOCKS];	      /* 1 + the first needle whose block this is, or 0 */
	uint8_t next[AL_NEEDLES_MAX]; /* 1 + the next needle with the same block, or 0 */
};

static unsigned block(const char *p)
{
	return (unsigned)(unsigned char)p[0] << 8 | (unsigned char)p[1];
}

static void compile(struct al_needles *set)
{
	size_t m = set->min_len;

	memset(set->shift, (int)(m - 1), sizeof(set->shift));
	for (size_t i = 0; i < set->n; i++)
		for (size_t j = 0; j + 1 < m; j++) {
			unsigned b = block(set->v[i] + j);
			uint8_t s = (uint8_t)(m - 2 - j);

			if (s < set->shift[b])
				set->shift[b] = s;
		}
	/* Chained in reverse so that each chain runs in index order. */
	for (size_t i = set->n; i-- > 0;) {
		unsigned b = block(set->v[i] + m - 2);

		set->next[i] = set->first[b];
		set->first[b] = (uint8_t)(i + 1);
	}
}

int al_needles_new(const char *const *needles, size_t n, struct al_needles **ret,
		   struct al_error *err)
{
	struct al_needles *set;

	if (n > AL_NEEDLES_MAX)
		return al_error_set(err, EINVAL, "more than %d needles", AL_NEEDLES_MAX);
	for (size_t i = 0; i < n; i++) {
		size_t len = needles[i] ? strlen(needles[i]) : 0;

		if (len < AL_NEEDLE_MIN || len > AL_NEEDLE_MAX)
			return al_error_set(err, EINVAL, "needle %zu is not %d to %d bytes long", i,
					    AL_NEEDLE_MIN, AL_NEEDLE_MAX);
		for (size_t j = 0; j < len; j++)
			if ((unsigned char)needles[i][j] <= ' ' ||
			    (unsigned char)needles[i][j] >= 0x7f)
				return al_error_set(err, EINVAL,
						    "needle %zu has a character other than "
						    "printable ASCII",
						    i);
	}
	set = xcalloc(1, sizeof(*set));
	set->n = n;
	set->v = xcalloc(n + 1, sizeof(char *));
	set->len = xcalloc(n + 1, sizeof(size_t));
	set->min_len = AL_NEEDLE_MAX;
	for (size_t i = 0; i < n; i++) {
		set->v[i] = xstrdup(needles[i]);
		set->len[i] = strlen(needles[i]);
		if (set->len[i] > set->max_len)
			set->max_len = set->len[i];
		if (set->len[i] < set->min_len)
			set->min_len = set->len[i];
	}
	compile(set);
	*ret = set;
	return 0;
}

void al_needles_free(struct al_needles *set)
{
	if (!set)
		return;
	for (size_t i = 0; i < set->n; i++)
		free(set->v[i]);
	free(set->v);
	free(set->len);
	free(set);
}

size_t al_needles_count(const struct al_needles *set)
{
	return set ? set->n : 0;
}

size_t al_needles_max_len(const struct al_needles *set)
{
	return set ? set->max_len : 0;
}

const char *al_needles_get(const struct al_needles *set, int i)
{
	return set && i >= 0 && (size_t)i < set->n ? set->v[i] : NULL;
}

size_t al_needles_len(const struct al_needles *set, int i)
{
	return set && i >= 0 && (size_t)i < set->n ? set->len[i] : 0;
}

/* The needle ending first among those that end after byte `after` (a
 * match must end at an offset > after, counting ends as one past the last
 * byte), or -1. Windows are visited by where they start; once a match is
 * found, only windows that could still end earlier are looked at. */
static int find_after(const struct al_needles *set, al_needle_mask skip, const char *buf,
		      size_t len, size_t after, size_t *ret_off)
{
	size_t m = set->min_len, best_end = SIZE_MAX, best_off = 0;
	int best = -1;

	for (size_t i = m - 1; i < len && i < best_end;) {
		unsigned b = block(buf + i - 1);
		size_t start = i + 1 - m;

		if (set->shift[b]) {
			i += set->shift[b];
			continue;
		}
		for (unsigned k = set->first[b]; k; k = set->next[k - 1]) {
			size_t nl = set->len[k - 1], end = start + nl;

			if (((skip >> (k - 1)) & 1) || end > len || end <= after ||
			    end > best_end || (end == best_end && (int)k - 1 > best) ||
			    memcmp(buf + start, set->v[k - 1], nl) != 0)
				continue;
			best = (int)k - 1;
			best_off = start;
			best_end = end;
		}
		i++;
	}
	if (best >= 0 && ret_off)
		*ret_off = best_off;
	return best;
}

int al_needles_find(const struct al_needles *set, al_needle_mask skip, const char *buf, size_t len,
		    size_t *ret_off)
{
	if (!set || set->n == 0 || !buf)
		return -1;
	return find_after(set, skip, buf, len, 0, ret_off);
}

void al_needle_scan_init(struct al_needle_scan *s, const struct al_needles *set,
			 al_needle_mask skip)
{
	s->set = set;
	s->skip = skip;
	s->carry_len = 0;
}

void al_needle_scan_reset(struct al_needle_scan *s)
{
	s->carry_len = 0;
}

/* Keep the stream's last max_len - 1 bytes: enough for any needle that
 * starts before the next feed and ends in it. */
static void keep_tail(struct al_needle_scan *s, const char *buf, size_t len)
{
	size_t keep = s->set->max_len - 1;

	if (len >= keep) {
		memcpy(s->carry, buf + len - keep, keep);
		s->carry_len = keep;
		return;
	}
	if (s->carry_len + len > keep) {
		size_t drop = s->carry_len + len - keep;

		memmove(s->carry, s->carry + drop, s->carry_len - drop);
		s->carry_len -= drop;
	}
	memcpy(s->carry + s->carry_len, buf, len);
	s->carry_len += len;
}

int al_needle_scan_feed(struct al_needle_scan *s, const char *buf, size_t len)
{
	int found = -1;

	if (!s->set || s->set->n == 0 || len == 0)
		return -1;
	if (s->carry_len > 0) {
		/* Needles across the boundary: the carried bytes and as many
		 * new ones as a needle could still need. */
		char joint[2 * AL_NEEDLE_MAX];
		size_t head = len < s->set->max_len - 1 ? len : s->set->max_len - 1;

		memcpy(joint, s->carry, s->carry_len);
		memcpy(joint + s->carry_len, buf, head);
		found = find_after(s->set, s->skip, joint, s->carry_len + head, s->carry_len, NULL);
	}
	if (found < 0)
		found = find_after(s->set, s->skip, buf, len, 0, NULL);
	keep_tail(s, buf, len);
	return found;
}
