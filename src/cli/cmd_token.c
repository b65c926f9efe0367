/* airlock token: the per-run JWTs from outside a run. verify checks a token
 * as a service would (for operators, and for tests that need a second
 * opinion), jwks prints what services verify EdDSA tokens with, keygen
 * makes a key file, mint makes a token by hand. */
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"
#include "cred/jwt.h"

#define EXIT_REFUSED 1 /* verify: the token is not valid */
#define EXIT_FAIL    125

enum {
	T_VERIFY = 1 << 0,
	T_JWKS = 1 << 1,
	T_KEYGEN = 1 << 2,
	T_MINT = 1 << 3,
};

struct token_args {
	const char *key, *out, *iss, *sub, *scope, *token;
	char **aud; /* verify: the one wanted; mint: every one, in order */
	enum al_jwt_alg alg;
	int64_t now; /* -1: the clock's */
	int64_t ttl; /* 0: not given */
	bool help;
};

struct token_opt {
	const char *name;
	const char *arg; /* NULL: takes none */
	unsigned cmds;	 /* T_* bits */
	const char *help;
	int (*apply)(struct token_args *a, const struct token_opt *o, const char *arg,
		     struct al_error *err);
};

struct token_cmd {
	const char *name;
	unsigned bit;
	const char *synopsis, *what;
	int (*run)(const struct token_args *a);
};

static int opt_key(struct token_args *a, const struct token_opt *o, const char *arg,
		   struct al_error *err)
{
	a->key = arg;
	return 0;
}

static int opt_out(struct token_args *a, const struct token_opt *o, const char *arg,
		   struct al_error *err)
{
	a->out = arg;
	return 0;
}

static int opt_aud(struct token_args *a, const struct token_opt *o, const char *arg,
		   struct al_error *err)
{
	if (!arg[0])
		return al_error_set(err, EINVAL, "--aud: empty audience");
	al_strv_push(&a->aud, arg);
	return 0;
}

static int opt_string(struct token_args *a, const struct token_opt *o, const char *arg,
		      struct al_error *err)
{
	if (strcmp(o->name, "sub") == 0)
		a->sub = arg;
	else if (strcmp(o->name, "iss") == 0)
		a->iss = arg;
	else
		a->scope = arg;
	return 0;
}

static int opt_alg(struct token_args *a, const struct token_opt *o, const char *arg,
		   struct al_error *err)
{
	if (strcasecmp(arg, "eddsa") == 0)
		a->alg = AL_JWT_EDDSA;
	else if (strcasecmp(arg, "hs256") == 0)
		a->alg = AL_JWT_HS256;
	else
		return al_error_set(err, EINVAL, "--alg %s: expected eddsa or hs256", arg);
	return 0;
}

static int opt_now(struct token_args *a, const struct token_opt *o, const char *arg,
		   struct al_error *err)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(arg, &end, 10);
	if (errno || end == arg || *end || v < 0)
		return al_error_set(err, EINVAL, "--now %s: expected seconds since the epoch", arg);
	a->now = v;
	return 0;
}

static int opt_ttl(struct token_args *a, const struct token_opt *o, const char *arg,
		   struct al_error *err)
{
	uint64_t ms;

	if (al_parse_duration_ms(arg, &ms) < 0 || ms % 1000 != 0)
		return al_error_set(err, EINVAL,
				    "--ttl %s: expected whole seconds (e.g. 600) or a duration "
				    "(90s, 10m, 1h)",
				    arg);
	a->ttl = (int64_t)(ms / 1000);
	return 0;
}

static int opt_help(struct token_args *a, const struct token_opt *o, const char *arg,
		    struct al_error *err)
{
	a->help = true;
	return 0;
}

static const struct token_opt options[] = {
    {"key", "FILE", T_VERIFY | T_JWKS | T_MINT,
     "the key: a PEM Ed25519 key (EdDSA) or an HS256 secret file", opt_key},
    {"aud", "HOST", T_VERIFY | T_MINT,
     "verify: the audience the token must name; mint: an audience (repeatable)", opt_aud},
    {"now", "SECONDS", T_VERIFY | T_MINT,
     "for testing: the time (seconds since the epoch) instead of the clock's", opt_now},
    {"alg", "eddsa|hs256", T_KEYGEN, "the kind of key to make", opt_alg},
    {"out", "FILE", T_KEYGEN, "the new key file (created with mode 0600; never replaced)", opt_out},
    {"sub", "SUBJECT", T_MINT, "the subject (sub)", opt_string},
    {"ttl", "SECONDS", T_MINT, "how long the token is valid (exp = now + SECONDS)", opt_ttl},
    {"iss", "ISSUER", T_MINT, "the issuer (iss; default \"airlock\")", opt_string},
    {"scope", "SCOPE", T_MINT, "the scope claim (left out when not given)", opt_string},
    {"help", NULL, T_VERIFY | T_JWKS | T_KEYGEN | T_MINT, "show this help", opt_help},
};

static int load_key(const struct token_args *a, struct al_jwt_key **ret)
{
	struct al_error err = {0};

	if (al_jwt_key_load(a->key, ret, &err) < 0) {
		al_err("token: %s", err.msg);
		return EXIT_FAIL;
	}
	return 0;
}

/* The token argument, or stdin's (one trailing newline dropped) for "-". */
static int read_token(const char *arg, char *buf, size_t size, const char **ret, size_t *ret_len)
{
	size_t len = 0;
	ssize_t n;

	if (strcmp(arg, "-") != 0) {
		*ret = arg;
		*ret_len = strlen(arg);
		return 0;
	}
	while (len < size && (n = read(STDIN_FILENO, buf + len, size - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			al_err("token: reading the token from stdin: %s", strerror(errno));
			return EXIT_FAIL;
		}
		len += (size_t)n;
	}
	if (len == size) {
		al_err("token: the token on stdin is longer than %d bytes, the most a token may be",
		       AL_JWT_TOKEN_MAX);
		return EXIT_REFUSED;
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (len > 0 && buf[len - 1] == '\r')
		len--;
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int run_verify(const struct token_args *a)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = NULL;
	_cleanup_(json_decrefp) json_t *claims = NULL;
	/* Room for one byte past the longest token: verify names the size. */
	char buf[AL_JWT_TOKEN_MAX + 3];
	struct al_error err = {0};
	const char *tok;
	size_t len;
	int r;

	if ((r = load_key(a, &k)) || (r = read_token(a->token, buf, sizeof(buf), &tok, &len)))
		return r;
	if (al_jwt_verify(k, tok, len, a->aud ? a->aud[0] : NULL, a->now, &claims, &err) < 0) {
		al_err("token: %s", err.msg);
		return EXIT_REFUSED;
	}
	/* ASCII only: claims are text another party wrote, on its way to a
	 * terminal. */
	_cleanup_free_ char *text =
	    json_dumps(claims, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	printf("%s\n", text);
	return 0;
}

static int run_jwks(const struct token_args *a)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = NULL;
	_cleanup_free_ char *jwks = NULL;
	struct al_error err = {0};
	int r;

	if ((r = load_key(a, &k)))
		return r;
	if (al_jwt_jwks(k, &jwks, &err) < 0) {
		al_err("token: %s", err.msg);
		return EXIT_FAIL;
	}
	printf("%s\n", jwks);
	return 0;
}

static int run_keygen(const struct token_args *a)
{
	struct al_error err = {0};

	if (al_jwt_keygen(a->alg, a->out, &err) < 0) {
		al_err("token: %s", err.msg);
		return EXIT_FAIL;
	}
	return 0;
}

static int run_mint(const struct token_args *a)
{
	_cleanup_(al_jwt_key_freep) struct al_jwt_key *k = NULL;
	_cleanup_free_ char *tok = NULL;
	struct al_error err = {0};
	char jti[AL_JWT_JTI_LEN + 1];
	int r;

	if ((r = load_key(a, &k)))
		return r;
	if (al_jwt_new_jti(jti, &err) < 0) {
		al_err("token: %s", err.msg);
		return EXIT_FAIL;
	}
	struct al_jwt_claims c = {
	    .iss = a->iss ? a->iss : "airlock",
	    .sub = a->sub,
	    .aud = (const char *const *)a->aud,
	    .n_aud = al_strv_len(a->aud),
	    .iat = a->now,
	    .exp = a->now + a->ttl,
	    .jti = jti,
	    .scope = a->scope,
	};
	if (al_jwt_mint(k, &c, &tok, &err) < 0) {
		al_err("token: %s", err.msg);
		return EXIT_FAIL;
	}
	printf("%s\n", tok);
	return 0;
}

static const struct token_cmd commands[] = {
    {"verify", T_VERIFY, "verify --key FILE [--aud HOST] [--now SECONDS] TOKEN|-",
     "Verify TOKEN (or the one on stdin, with -) and print its claims as JSON.\n"
     "Exit status: 0 valid, 1 not valid (one line says why), 125 other errors.",
     run_verify},
    {"jwks", T_JWKS, "jwks --key FILE",
     "Print the JWK Set that services verify EdDSA tokens with (Ed25519 keys only:\n"
     "an HS256 key is a shared secret and has no public part).",
     run_jwks},
    {"keygen", T_KEYGEN, "keygen --alg eddsa|hs256 --out FILE",
     "Write a new key: an Ed25519 private key (PKCS#8 PEM), or for HS256 32 random\n"
     "bytes as 64 hex digits (the file's exact bytes are the secret).",
     run_keygen},
    {"mint", T_MINT,
     "mint --key FILE --sub SUBJECT --aud HOST [--aud HOST...] --ttl SECONDS\n"
     "                     [--iss ISSUER] [--scope SCOPE]",
     "Mint one token (iat = now, exp = now + SECONDS, a random jti) and print it.", run_mint},
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock token COMMAND [OPTIONS]\n\n"
		   "The per-run JWTs (HS256 or EdDSA), from outside a run "
		   "(docs/credentials.md).\n\nCommands:\n");
	for (size_t i = 0; i < AL_ARRAY_SIZE(commands); i++)
		fprintf(f, "  airlock token %s\n", commands[i].synopsis);
	fprintf(f, "\nRun \"airlock token COMMAND --help\" for a command's options.\n");
}

static void command_usage(FILE *f, const struct token_cmd *c)
{
	fprintf(f, "Usage: airlock token %s\n\n%s\n\nOptions:\n", c->synopsis, c->what);
	for (size_t i = 0; i < AL_ARRAY_SIZE(options); i++) {
		const struct token_opt *o = &options[i];
		char left[64];
		if (!(o->cmds & c->bit))
			continue;
		snprintf(left, sizeof(left), "--%s%s%s", o->name, o->arg ? " " : "",
			 o->arg ? o->arg : "");
		fprintf(f, "  %-24s %s\n", left, o->help);
	}
}

static const struct token_opt *find_option(const char *name, size_t len)
{
	for (size_t i = 0; i < AL_ARRAY_SIZE(options); i++)
		if (strlen(options[i].name) == len && strncmp(options[i].name, name, len) == 0)
			return &options[i];
	return NULL;
}

/* One option at argv[*i] (--name VALUE or --name=VALUE). */
static int parse_option(const struct token_cmd *c, struct token_args *a, int argc, char **argv,
			int *i, struct al_error *err)
{
	const char *arg = argv[*i], *value = NULL, *eq = strchr(arg, '=');
	const struct token_opt *o = NULL;

	if (strcmp(arg, "-h") == 0)
		o = find_option("help", 4);
	else if (arg[1] == '-')
		o = find_option(arg + 2, eq ? (size_t)(eq - arg - 2) : strlen(arg + 2));
	if (!o || !(o->cmds & c->bit))
		return al_error_set(err, EINVAL,
				    "token %s: unknown option %s (see airlock token %s --help)",
				    c->name, arg, c->name);
	if (o->arg && eq)
		value = eq + 1;
	else if (o->arg && *i + 1 < argc)
		value = argv[++*i];
	else if (o->arg)
		return al_error_set(err, EINVAL, "token %s: option --%s needs an argument (%s)",
				    c->name, o->name, o->arg);
	else if (eq)
		return al_error_set(err, EINVAL, "token %s: option --%s takes no argument", c->name,
				    o->name);
	if (o->apply(a, o, value, err) < 0)
		return al_error_wrap(err, "token %s", c->name);
	return 0;
}

/* What the command cannot do without. */
static int check_required(const struct token_cmd *c, const struct token_args *a,
			  struct al_error *err)
{
	const char *missing = NULL;

	if ((c->bit & (T_VERIFY | T_JWKS | T_MINT)) && !a->key)
		missing = "--key FILE";
	else if (c->bit == T_VERIFY && !a->token)
		missing = "the TOKEN (or - for stdin)";
	else if (c->bit == T_VERIFY && al_strv_len(a->aud) > 1)
		return al_error_set(err, EINVAL,
				    "token verify: --aud is given once (the audience "
				    "the token must name)");
	else if (c->bit == T_KEYGEN && !a->alg)
		missing = "--alg eddsa|hs256";
	else if (c->bit == T_KEYGEN && !a->out)
		missing = "--out FILE";
	else if (c->bit == T_MINT && !a->sub)
		missing = "--sub SUBJECT";
	else if (c->bit == T_MINT && !a->aud)
		missing = "--aud HOST";
	else if (c->bit == T_MINT && !a->ttl)
		missing = "--ttl SECONDS";
	if (missing)
		return al_error_set(err, EINVAL,
				    "token %s: %s is required (see airlock token %s "
				    "--help)",
				    c->name, missing, c->name);
	return 0;
}

static int parse(const struct token_cmd *c, struct token_args *a, int argc, char **argv,
		 struct al_error *err)
{
	int i, r;

	for (i = 0; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--") == 0 && c->bit == T_VERIFY && i + 1 < argc) {
			arg = argv[++i];
		} else if (arg[0] == '-' && arg[1] != '\0') {
			if ((r = parse_option(c, a, argc, argv, &i, err)) < 0)
				return r;
			continue;
		}
		if (c->bit != T_VERIFY || a->token)
			return al_error_set(err, EINVAL, "token %s: unexpected argument \"%s\"",
					    c->name, arg);
		a->token = arg;
	}
	return a->help ? 0 : check_required(c, a, err);
}

int al_cmd_token(int argc, char **argv)
{
	struct token_args a = {.now = -1};
	struct al_error err = {0};
	const struct token_cmd *c = NULL;
	int code;

	if (argc < 1) {
		usage(stderr);
		return EXIT_FAIL;
	}
	if (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0 ||
	    strcmp(argv[0], "help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < AL_ARRAY_SIZE(commands); i++)
		if (strcmp(argv[0], commands[i].name) == 0)
			c = &commands[i];
	if (!c) {
		al_err("token: unknown command \"%s\" (see airlock token --help)", argv[0]);
		return EXIT_FAIL;
	}
	if (parse(c, &a, argc - 1, argv + 1, &err) < 0) {
		al_err("%s", err.msg);
		code = EXIT_FAIL;
	} else if (a.help) {
		command_usage(stdout, c);
		code = 0;
	} else {
		if (a.now < 0)
			a.now = (int64_t)time(NULL);
		code = c->run(&a);
	}
	al_strv_free(a.aud);
	return code;
}
