/* bench/jwt.c: how fast cred/jwt.c mints and verifies, per algorithm, as
 * the gateway would mint per request (a fresh jti each time). Rounds of
 * each case are interleaved so that machine noise hits all alike; prints
 * the median and p10/p90 of each case's rate over the rounds. Time is the
 * thread's CPU time, not the wall clock's: on a shared machine that is
 * what an operation costs, as `openssl speed` measures it too.
 *
 * usage: bench_jwt [ROUNDS [PER_ROUND]]   (defaults 31 and 2000) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cred/jwt.h"

#define NOW 1796155800

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct al_jwt_key *new_key(enum al_jwt_alg alg, const char *dir)
{
	char path[256];
	struct al_jwt_key *k = NULL;
	struct al_error err = {0};

	snprintf(path, sizeof(path), "%s/%s", dir, alg == AL_JWT_EDDSA ? "ed.pem" : "hs.key");
	if (al_jwt_keygen(alg, path, &err) < 0 || al_jwt_key_load(path, &k, &err) < 0) {
		fprintf(stderr, "bench_jwt: %s\n", err.msg);
		exit(1);
	}
	return k;
}

static char *mint_one(const struct al_jwt_key *k)
{
	static const char *const aud[] = {"api.example.com"};
	struct al_error err = {0};
	char jti[AL_JWT_JTI_LEN + 1], *tok = NULL;

	if (al_jwt_new_jti(jti, &err) < 0) {
		fprintf(stderr, "bench_jwt: %s\n", err.msg);
		exit(1);
	}
	struct al_jwt_claims c = {.iss = "airlock",
				  .sub = "run:0123456789abcdef",
				  .aud = aud,
				  .n_aud = 1,
				  .iat = NOW,
				  .exp = NOW + 600,
				  .jti = jti,
				  .scope = "read"};
	if (al_jwt_mint(k, &c, &tok, &err) < 0) {
		fprintf(stderr, "bench_jwt: mint: %s\n", err.msg);
		exit(1);
	}
	return tok;
}

/* Operations per second over n of them. */
static double round_rate(const struct al_jwt_key *k, const char *tok, int n)
{
	struct al_error err = {0};
	double t0 = now_s();

	for (int i = 0; i < n; i++) {
		if (!tok) {
			free(mint_one(k));
		} else if (al_jwt_verify(k, tok, strlen(tok), "api.example.com", NOW, NULL, &err) <
			   0) {
			fprintf(stderr, "bench_jwt: verify: %s\n", err.msg);
			exit(1);
		}
	}
	return n / (now_s() - t0);
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 31, per = argc > 2 ? atoi(argv[2]) : 2000;
	char dir[] = "/tmp/bench_jwt.XXXXXX";
	const char *names[] = {"HS256 mint", "EdDSA mint", "HS256 verify", "EdDSA verify"};
	struct al_jwt_key *keys[2];
	char *toks[2];
	double *rate[4];

	if (rounds < 1 || per < 1 || !mkdtemp(dir)) {
		fprintf(stderr, "usage: bench_jwt [ROUNDS [PER_ROUND]]\n");
		return 1;
	}
	keys[0] = new_key(AL_JWT_HS256, dir);
	keys[1] = new_key(AL_JWT_EDDSA, dir);
	for (int a = 0; a < 2; a++)
		toks[a] = mint_one(keys[a]);
	for (int c = 0; c < 4; c++)
		rate[c] = calloc((size_t)rounds, sizeof(double));
	for (int c = 0; c < 4; c++) /* warm-up */
		round_rate(keys[c % 2], c < 2 ? NULL : toks[c % 2], per / 10 + 1);
	for (int r = 0; r < rounds; r++)
		for (int c = 0; c < 4; c++)
			rate[c][r] = round_rate(keys[c % 2], c < 2 ? NULL : toks[c % 2], per);
	printf("| what | per CPU second (median) | p10 | p90 | µs of CPU each |\n"
	       "|---|---|---|---|---|\n");
	for (int c = 0; c < 4; c++) {
		qsort(rate[c], (size_t)rounds, sizeof(double), cmp);
		double med = rate[c][rounds / 2];
		printf("| %s | %.0f | %.0f | %.0f | %.1f |\n", names[c], med, rate[c][rounds / 10],
		       rate[c][rounds - 1 - rounds / 10], 1e6 / med);
	}
	printf("(%d rounds of %d; tokens of %zu and %zu bytes)\n", rounds, per, strlen(toks[0]),
	       strlen(toks[1]));
	for (int a = 0; a < 2; a++) {
		free(toks[a]);
		al_jwt_key_free(keys[a]);
	}
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", dir);
	return system(cmd) == 0 ? 0 : 1;
}
