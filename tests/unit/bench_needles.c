/* How fast the gateway looks for placeholders in plaintext egress
 * (gateway/needles.h) and filters a request stream (gateway/reqstream.h):
 * meson test --benchmark -C BUILD needles. Prints MB/s; asserts only that
 * nothing was found in text that holds no needle and that the planted
 * needle was, so a broken scanner cannot look fast. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/util.h"
#include "gateway/needles.h"
#include "gateway/reqstream.h"

#define TOTAL (256u << 20)
#define CHUNK (16u << 10)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Text like what goes out: JSON with base64-ish and word-ish parts,
 * "airlock" and dashes included, so a scan that checks a common prefix
 * first gets no free ride. */
static void fill(char *buf, size_t len)
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789+/=-_\":{},";
	unsigned x = 12345;

	for (size_t i = 0; i < len; i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = alpha[(x >> 16) % (sizeof(alpha) - 1)];
		if (i % 97 == 0 && i + 12 < len) {
			memcpy(buf + i, "airlock-ph-", 11);
			i += 10;
		}
	}
}

static int bench_scan(size_t n_needles, size_t needle_len)
{
	char *needles[AL_NEEDLES_MAX], *buf = xmalloc(TOTAL);
	struct al_needles *set = NULL;
	struct al_needle_scan scan;
	struct al_error err = {0};
	double t;
	int found = -1;

	for (size_t i = 0; i < n_needles; i++) {
		needles[i] = xmalloc(needle_len + 1);
		snprintf(needles[i], needle_len + 1, "airlock-ph-%02zx%0*d", i, (int)needle_len, 7);
		needles[i][needle_len] = '\0';
	}
	if (al_needles_new((const char *const *)needles, n_needles, &set, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	fill(buf, TOTAL);
	al_needle_scan_init(&scan, set, 0);
	t = now();
	for (size_t off = 0; off < TOTAL && found < 0; off += CHUNK)
		found = al_needle_scan_feed(&scan, buf + off, CHUNK);
	t = now() - t;
	printf("needle scan: %zu needles of %zu bytes, %u KiB feeds: %.0f MB/s", n_needles,
	       needle_len, CHUNK >> 10, TOTAL / t / 1e6);
	/* The same text with memmem() once per needle, for comparison. */
	t = now();
	for (size_t off = 0; off < TOTAL; off += CHUNK)
		for (size_t i = 0; i < n_needles; i++)
			if (memmem(buf + off, CHUNK, needles[i], needle_len))
				found = (int)i;
	t = now() - t;
	printf(" (memmem per needle: %.0f MB/s)\n", TOTAL / t / 1e6);
	if (found >= 0) {
		fprintf(stderr, "found needle %d in text without any\n", found);
		return 1;
	}
	memcpy(buf + TOTAL - 100, needles[n_needles - 1], needle_len);
	al_needle_scan_reset(&scan);
	for (size_t off = 0; off < TOTAL && found < 0; off += CHUNK)
		found = al_needle_scan_feed(&scan, buf + off, CHUNK);
	if (found != (int)n_needles - 1) {
		fprintf(stderr, "the planted needle was not found (%d)\n", found);
		return 1;
	}
	al_needles_free(set);
	for (size_t i = 0; i < n_needles; i++)
		free(needles[i]);
	free(buf);
	return 0;
}

/* One request with a large streamed body through the whole filter. */
static int bench_stream(void)
{
	static const char *const needles[] = {
	    "airlock-ph-aaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "airlock-ph-bbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
	    "airlock-ph-ccccccccccccccccccccccccccccc", "airlock-ph-ddddddddddddddddddddddddddddd",
	    "airlock-ph-eeeeeeeeeeeeeeeeeeeeeeeeeeeee", "airlock-ph-fffffffffffffffffffffffffffff",
	    "airlock-ph-ggggggggggggggggggggggggggggg", "airlock-ph-hhhhhhhhhhhhhhhhhhhhhhhhhhhhh",
	};
	struct al_reqstream_conf conf = {
	    .host = "api.example.com",
	    .port = 80,
	};
	struct al_reqstream *rs = NULL;
	struct al_needles *set = NULL;
	struct al_reqstream_event ev;
	struct al_error err = {0};
	char *buf = xmalloc(TOTAL + 256);
	size_t head, off = 0, out = 0;
	double t;

	if (al_needles_new(needles, 8, &set, &err) < 0)
		return 1;
	conf.needles = set;
	head = (size_t)snprintf(buf, 256,
				"POST /up HTTP/1.1\r\nHost: api.example.com\r\n"
				"Content-Length: %u\r\n\r\n",
				TOTAL);
	fill(buf + head, TOTAL);
	if (al_reqstream_new(&conf, &rs, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return 1;
	}
	t = now();
	while (off < head + TOTAL) {
		size_t n = head + TOTAL - off < CHUNK ? head + TOTAL - off : CHUNK;

		off += al_reqstream_feed(rs, buf + off, n);
		while (al_reqstream_next(rs, 65536, &ev) != AL_REQSTREAM_MORE)
			if (ev.kind == AL_REQSTREAM_DATA)
				out += ev.len;
			else if (ev.kind != AL_REQSTREAM_REQUEST)
				break;
	}
	t = now() - t;
	printf("request stream: one %u MiB body, 8 needles: %.0f MB/s\n", TOTAL >> 20,
	       TOTAL / t / 1e6);
	al_reqstream_free(rs);
	al_needles_free(set);
	free(buf);
	if (out < TOTAL) {
		fprintf(stderr, "only %zu bytes went through\n", out);
		return 1;
	}
	return 0;
}

int main(void)
{
	if (bench_scan(8, 40) || bench_scan(1, 40) || bench_scan(32, 40) || bench_stream())
		return 1;
	return 0;
}
