/* Side-effect-free helpers: allocation wrappers that abort on failure,
 * string vectors, size and duration parsing, path checks. No syscalls
 * here beyond malloc (minijail's util/system split); those live in sys.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* NULL-terminated string vectors. */
/* a + b, or UINT64_MAX where that would wrap (counters from outside). */
static inline uint64_t al_add_sat(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

size_t al_strv_len(char *const *v);
/* Append a copy of s; *v may be NULL. */
void al_strv_push(char ***v, const char *s);
/* Append s itself (takes ownership). */
void al_strv_push_take(char ***v, char *s);
char **al_strv_dup(char *const *v);
void al_strv_free(char **v);
/* The strings of v with sep between them: a new string ("" for NULL). */
char *al_strv_join(char *const *v, const char *sep);
static inline void al_strv_freep(char ***v)
{
	al_strv_free(*v);
}

/* Parse "64M", "512k", "1G", "1048576" (binary units K/M/G/T, optional
 * trailing "B"/"iB"). Returns 0 or -EINVAL/-ERANGE; writes *ret only on
 * success. */
int al_parse_size(const char *s, uint64_t *ret);
#define AL_SIZE_MAX (1ull << 62) /* the largest size al_parse_size() takes */

/* Parse "60", "1.5", "250ms", "90s", "2m", "1h" into milliseconds (> 0). */
int al_parse_duration_ms(const char *s, uint64_t *ret);

/* Format bytes as the shortest exact "64M"/"512K"/"1000" form. */
void al_format_size(uint64_t bytes, char *buf, size_t len);

/* True for an absolute path with no "." or ".." components, no empty
 * components ("//"), no trailing slash (except "/" itself) and no control
 * characters: the only form a plan ever stores. */
bool al_path_is_clean_absolute(const char *p);

/* True if path equals prefix or lies beneath it ("/a" is under "/a" and
 * "/a/b", not "/ab"). */
bool al_path_is_under(const char *path, const char *prefix);

/* Environment-variable names: [A-Za-z_][A-Za-z0-9_]*. */
bool al_env_name_is_valid(const char *name);

/* Hostnames as sethostname() accepts and resolvers expect: 1-63 chars of
 * [A-Za-z0-9-], not starting or ending with '-'. */
bool al_hostname_is_valid(const char *name);

/* Copy in to out (outlen bytes, NUL included) as well-formed UTF-8: each
 * byte that does not belong to a well-formed character becomes the four
 * characters \xNN, and a copy cut short by outlen ends on a character's
 * boundary. For text from clients (URLs, file names) put in JSON, which
 * takes UTF-8 only. True when any byte was escaped. */
bool al_utf8_escape(char *out, size_t outlen, const char *in);

/* The value of a hex digit (either case), or -1. */
int al_hex_digit(char c);
/* An HTTP token character (RFC 9110 tchar). */
bool al_is_tchar(char c);
