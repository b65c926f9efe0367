/* The operator policy: its model's lifetime, finding and loading the file.
 * The parser is operator-parse.c. */
#include "policy/operator.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
/* SHA256() rather than EVP: EVP pulls most of libcrypto into the static
 * binary (docs/benchmarks.md, issue 10). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/cleanup.h"
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

static void paths_free(struct al_op_path *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].real);
		free(v[i].where);
	}
	free(v);
}

static void profile_clear(struct al_op_profile *pr)
{
	free(pr->name);
	free(pr->where);
	paths_free(pr->ro, pr->n_ro);
	paths_free(pr->rw, pr->n_rw);
	paths_free(pr->never, pr->n_never);
	al_strv_free(pr->system);
	al_allow_free(pr->allow);
	al_allow_free(pr->always);
	al_allow_free(pr->never_net);
	al_allow_free(pr->hosts_to);
	al_strv_free(pr->always_text);
	al_strv_free(pr->never_text);
	al_strv_free(pr->hosts_text);
	al_strv_free(pr->resolvers);
	al_strv_free(pr->backends);
	free(pr->backend_min);
	free(pr->backend_default);
	al_strv_free(pr->env_allow);
	al_strv_free(pr->env_never);
	al_strv_free(pr->env_pass);
	al_strv_free(pr->grants);
	for (size_t i = 0; i < pr->n_rule_opts; i++)
		al_rule_opts_free(pr->rule_opts[i]);
	free(pr->rule_opts);
	al_budget_clear(&pr->budget);
}

void al_operator_free(struct al_operator *op)
{
	if (!op)
		return;
	for (size_t i = 0; i < op->n_profiles; i++)
		profile_clear(&op->profiles[i]);
	free(op->profiles);
	al_decider_conf_free(op->decider);
	for (size_t i = 0; i < op->n_secrets; i++)
		al_secret_def_free(op->secrets[i]);
	free(op->secrets);
	al_op_serve_clear(&op->serve);
	al_strv_free(op->oci.profiles);
	free(op->file);
	free(op);
}

const char *const al_operator_env_never_default[] = {"LD_*",
						     "GCONV_PATH",
						     "HOSTALIASES",
						     "LOCALDOMAIN",
						     "RES_OPTIONS",
						     "BASH_ENV",
						     "ENV",
						     "SHELLOPTS",
						     "BASHOPTS",
						     "PS4",
						     "PYTHONPATH",
						     "PYTHONHOME",
						     "PYTHONSTARTUP",
						     "PYTHONUSERBASE",
						     "PERL5LIB",
						     "PERL5OPT",
						     "PERLLIB",
						     "RUBYLIB",
						     "RUBYOPT",
						     "NODE_OPTIONS",
						     "NODE_PATH",
						     "JAVA_TOOL_OPTIONS",
						     "_JAVA_OPTIONS",
						     "JDK_JAVA_OPTIONS",
						     "MALLOC_*",
						     "GLIBC_TUNABLES",
						     NULL};

/* Rules no run gets unless a profile says otherwise: link-local space,
 * where cloud metadata services answer. */
static const char *const net_never_default[] = {"169.254.0.0/16:*", "[fe80::/10]:*",
						"[fd00:ec2::254]:*", NULL};

void al_op_profile_defaults(struct al_op_profile *pr, const char *name, const char *where)
{
	pr->name = xstrdup(name);
	pr->where = xstrdup(where);
	pr->never_net = al_allow_new();
	pr->never_text = xcalloc(1, sizeof(char *));
	for (size_t i = 0; net_never_default[i]; i++) {
		al_allow_add(pr->never_net, net_never_default[i], NULL);
		al_strv_push(&pr->never_text, net_never_default[i]);
	}
	pr->env_allow = xcalloc(2, sizeof(char *));
	pr->env_allow[0] = xstrdup("*");
	pr->env_never = al_strv_dup((char *const *)al_operator_env_never_default);
	pr->n_env_never_default = al_strv_len(pr->env_never);
	pr->n_never_net_default = al_strv_len(pr->never_text);
	pr->env_pass = xcalloc(1, sizeof(char *));
}

const struct al_op_profile *al_operator_profile(const struct al_operator *op, const char *name)
{
	for (size_t i = 0; op && i < op->n_profiles; i++)
		if (strcmp(op->profiles[i].name, name) == 0)
			return &op->profiles[i];
	return NULL;
}

/* realpath() of path, or of its longest existing ancestor with the rest
 * appended: a never path that does not exist yet, under a link, must
 * still match where a mount would put it. NULL when nothing resolves. */
static char *resolve_ancestor(const char *path)
{
	_cleanup_free_ char *head = xstrdup(path);
	char real[PATH_MAX];

	for (;;) {
		if (realpath(head, real)) {
			const char *rest = path + strlen(head);
			if (!*rest)
				return xstrdup(real);
			return xasprintf("%s%s", strcmp(real, "/") ? real : "", rest);
		}
		char *slash = strrchr(head, '/');
		if (!slash || slash == head)
			return NULL;
		*slash = '\0';
	}
}

static void resolve_paths(struct al_op_path *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char real[PATH_MAX];
		struct stat st;
		if (!realpath(v[i].path, real) || stat(real, &st) < 0) {
			char *r = resolve_ancestor(v[i].path);
			if (r) {
				free(v[i].real);
				v[i].real = r;
			}
			continue; /* does not exist: matched by path only */
		}
		free(v[i].real);
		v[i].real = xstrdup(real);
		v[i].exists = true;
		v[i].dev = st.st_dev;
		v[i].ino = st.st_ino;
	}
}

void al_operator_resolve(struct al_operator *op)
{
	al_op_serve_resolve(op);
	for (size_t i = 0; i < op->n_profiles; i++) {
		struct al_op_profile *pr = &op->profiles[i];
		resolve_paths(pr->ro, pr->n_ro);
		resolve_paths(pr->rw, pr->n_rw);
		resolve_paths(pr->never, pr->n_never);
	}
}

/* The name a source goes by in messages. */
static const char *source_name(const char *how)
{
	if (strcmp(how, AL_OPERATOR_ENV) == 0)
		return "$" AL_OPERATOR_ENV;
	if (strcmp(how, "default") == 0)
		return "the machine's file";
	return how;
}

/* The operator's own source of bounds: the machine's file when it exists,
 * else $AIRLOCK_OPERATOR_POLICY (how a platform without the file sets
 * them). (A daemon's configuration will be one more, ahead of both.)
 * *ret_how NULL: none; the run's caller then chooses with the flag. */
static int operator_source(const char *env, const char **ret, const char **ret_how,
			   struct al_error *err)
{
	struct stat st;

	*ret = NULL;
	*ret_how = NULL;
	if (lstat(AL_OPERATOR_DEFAULT_FILE, &st) == 0) {
		*ret = AL_OPERATOR_DEFAULT_FILE;
		*ret_how = "default";
	} else if (errno != ENOENT) {
		return al_error_setsys(err, errno, "operator policy %s", AL_OPERATOR_DEFAULT_FILE);
	} else if (env && env[0]) {
		*ret = env;
		*ret_how = AL_OPERATOR_ENV;
	}
	return 0;
}

/* name (given by how) must be the operator's file src (given by src_how):
 * the same file by device and inode, however it is spelled. */
static int same_as_operator(const char *how, const char *name, const char *src_how, const char *src,
			    struct al_error *err)
{
	struct stat a, b;

	if (stat(src, &b) < 0)
		return al_error_setsys(err, errno, "operator policy %s (%s)", src,
				       source_name(src_how));
	if (stat(name, &a) < 0)
		return al_error_setsys(err, errno, "operator policy %s (%s)", name,
				       source_name(how));
	if (a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		return 0;
	return al_error_set(err, EPERM,
			    "%s %s: the operator's bounds come from %s (%s), and no other file "
			    "may replace them (the run's flags and environment are task input)",
			    source_name(how), name, src, source_name(src_how));
}

int al_operator_find(const char *flag, const char *env, char **ret, const char **ret_how,
		     struct al_error *err)
{
	const char *src, *src_how;
	int r;

	*ret = NULL;
	*ret_how = NULL;
	if ((r = operator_source(env, &src, &src_how, err)) < 0)
		return r;
	/* Once the operator's bounds come from a source, a flag (task input)
	 * or the environment beside the machine's file may only name that
	 * same file again: flags must not pick their own bounds. */
	if (src && flag && (r = same_as_operator("--operator-policy", flag, src_how, src, err)) < 0)
		return r;
	if (src && strcmp(src_how, "default") == 0 && env && env[0] &&
	    (r = same_as_operator(AL_OPERATOR_ENV, env, src_how, src, err)) < 0)
		return r;
	/* The file read is the source's own path, not the other name it was
	 * given by (which could be made to point elsewhere once checked). */
	if (src) {
		*ret_how = src_how;
		*ret = xstrdup(src);
	} else if (flag) {
		*ret_how = "--operator-policy";
		*ret = xstrdup(flag);
	}
	if (*ret && (*ret)[0] != '/') { /* every directory on the way is checked */
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			return al_error_setsys(err, errno, "operator policy %s: getcwd", *ret);
		char *abs = xasprintf("%s/%s", cwd, *ret);
		free(*ret);
		*ret = abs;
	}
	return 0;
}

static const char *mode_text(mode_t m, char *buf, size_t len)
{
	snprintf(buf, len, "%04o", (unsigned)(m & 07777));
	return buf;
}

/* As root: the file and every directory above it owned by root and not
 * writable by group or others (a directory with the sticky bit may be
 * writable by all: others cannot rename what root owns there), reached
 * without a symbolic link. */
static int check_trusted(const char *path, struct al_errors *errs)
{
	_cleanup_free_ char *copy = xstrdup(path);
	char mode[8];
	struct stat st;

	if (path[0] != '/')
		return al_errors_add(errs, EINVAL, path, NULL,
				     "the operator policy must be named by an absolute path");
	if (lstat("/", &st) < 0 || st.st_uid != 0 || (st.st_mode & 022))
		return al_errors_add(errs, EPERM, path, NULL,
				     "/ is not owned by root or is writable by others: no file "
				     "under it can be trusted");
	for (char *p = copy + 1;; p++) {
		bool last = *p == '\0';
		if (*p != '/' && !last)
			continue;
		*p = '\0';
		if (lstat(copy, &st) < 0)
			return al_errors_add(errs, errno, path, NULL, "%s: %s", copy,
					     strerror(errno));
		if (S_ISLNK(st.st_mode))
			return al_errors_add(errs, EPERM, path, NULL,
					     "%s is a symbolic link: the operator policy must be "
					     "reached without one",
					     copy);
		if (last && !S_ISREG(st.st_mode))
			return al_errors_add(errs, EINVAL, path, NULL, "not a regular file");
		if (st.st_uid != 0)
			return al_errors_add(errs, EPERM, path, NULL,
					     "%s is owned by uid %u (mode %s), not root: whoever "
					     "owns it could change the bounds",
					     copy, (unsigned)st.st_uid,
					     mode_text(st.st_mode, mode, sizeof(mode)));
		if ((st.st_mode & 022) && !(!last && (st.st_mode & S_ISVTX)))
			return al_errors_add(errs, EPERM, path, NULL,
					     "%s has mode %s: writable by %s, who could change the "
					     "bounds (chmod go-w)",
					     copy, mode_text(st.st_mode, mode, sizeof(mode)),
					     st.st_mode & 002 ? "anyone" : "its group");
		if (last)
			break;
		*p = '/';
	}
	return 0;
}

#define OPERATOR_FILE_MAX (4u << 20)

int al_operator_load_file(const char *path, struct al_operator **ret, struct al_errors *errs)
{
	_cleanup_free_ char *buf = NULL;
	_cleanup_close_ int fd = -1;
	unsigned char md[SHA256_DIGEST_LENGTH];
	size_t len = 0;
	struct stat st;
	ssize_t n;
	int r;

	if (geteuid() == 0 && (r = check_trusted(path, errs)) < 0)
		return r;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW);
	if (fd < 0 || fstat(fd, &st) < 0)
		return al_errors_add(errs, errno, path, NULL, "cannot read the operator policy: %s",
				     strerror(errno));
	if (!S_ISREG(st.st_mode))
		return al_errors_add(errs, EINVAL, path, NULL, "not a regular file");
	if (geteuid() != 0 && (st.st_mode & 022)) {
		char mode[8];
		return al_errors_add(errs, EPERM, path, NULL,
				     "mode %s: writable by others, who could change the bounds "
				     "(chmod go-w)",
				     mode_text(st.st_mode, mode, sizeof(mode)));
	}
	buf = xmalloc(OPERATOR_FILE_MAX + 1);
	while (len <= OPERATOR_FILE_MAX &&
	       (n = read(fd, buf + len, OPERATOR_FILE_MAX + 1 - len)) > 0)
		len += (size_t)n;
	if (n < 0)
		return al_errors_add(errs, errno, path, NULL, "cannot read the operator policy: %s",
				     strerror(errno));
	if (len > OPERATOR_FILE_MAX)
		return al_errors_add(errs, EFBIG, path, NULL, "larger than %u bytes",
				     OPERATOR_FILE_MAX);
	if ((r = al_operator_parse(path, buf, len, ret, errs)) < 0)
		return r;
	SHA256_CTX ctx; /* SHA256() itself goes through EVP in OpenSSL 3 */
	if (SHA256_Init(&ctx) != 1 || SHA256_Update(&ctx, buf, len) != 1 ||
	    SHA256_Final(md, &ctx) != 1) {
		al_operator_free(TAKE_PTR(*ret));
		return al_errors_add(errs, EIO, path, NULL, "sha256 failed");
	}
	for (unsigned i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf((*ret)->sha256 + 2 * i, 3, "%02x", md[i]);
	al_operator_resolve(*ret);
	return 0;
}
