/* Request rules: which methods, paths and body sizes a host takes (pure: no
 * syscalls, no allocation except in al_reqrule_text() and al_reqrule_clear()).
 *
 * The policy parser checks each path pattern with al_reqrule_pattern_check();
 * the egress gateway normalises each request's path with
 * al_reqrule_path_normalize() and holds the request to its host's rule with
 * al_reqrule_check(). docs/requests.md describes the language for users.
 *
 * Path patterns:
 * - start with '/'; have no query part ('?'), fragment, backslash, space,
 *   control or non-ASCII character, empty segment ("//") or dot segment;
 * - '*' matches one or more characters within one segment (never '/');
 * - a last segment of "**" matches the rest of the path: any segments, or
 *   none (the pattern "/v1/" "**" matches "/v1", "/v1/" and "/v1/a/b", not
 *   "/v1x"); "**" anywhere else is refused;
 * - everything else is literal and case-sensitive, and written as a
 *   normalised path is (below): unreserved characters plain, every other
 *   percent-encoding in upper case.
 *
 * A path is matched only once it is normalised (percent-decoding of the
 * unreserved characters, upper-case hex for the rest); paths that a server
 * could read as something else than what was matched (dot segments, encoded
 * '/' or '\', ...) are refused instead, and the gateway answers 400. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define AL_REQRULE_PATTERN_MAX 1024 /* longest path pattern */

/* One host's request rule. Every array and string is owned (freed by
 * al_reqrule_clear()). An empty list allows everything: n_methods == 0 any
 * method, n_paths == 0 any path; max_body == 0 is no limit. */
struct al_reqrule {
	char **methods; /* exact, case-sensitive tokens ("GET", "POST") */
	size_t n_methods;
	char **paths; /* patterns that passed al_reqrule_pattern_check() */
	size_t n_paths;
	uint64_t max_body; /* most body bytes a request may have */
	/* The rule as the 403's X-Airlock-Denied header names it, e.g.
	 * "analysis.internal:443 methods=POST paths=/v1/analysis/x"; may be
	 * NULL (al_reqrule_text() builds one). */
	char *text;
};

/* 0 if pattern is a valid path pattern; otherwise -EINVAL with err saying
 * what is wrong and where ("path pattern \"/a//b\": empty segment at
 * character 3"). */
int al_reqrule_pattern_check(const char *pattern, struct al_error *err);

/* 0 if method is a valid method token (1-32 token characters); otherwise
 * -EINVAL with err naming the problem. */
int al_reqrule_method_check(const char *method, struct al_error *err);

/* True if the normalised path (len bytes at path, no query) matches
 * pattern. pattern must have passed al_reqrule_pattern_check(); for other
 * patterns the answer is false or meaningless, never a crash. */
bool al_reqrule_path_match(const char *pattern, const char *path, size_t len);

/* Normalise the path of a request target: target is len bytes (not
 * NUL-terminated) starting with '/', or empty or starting with '?' (then
 * the path is "/"); only the part before the first '?' is read. Writes the
 * normalised path and a NUL to out and returns its length (> 0).
 * Percent-encodings of unreserved characters (ALPHA DIGIT - . _ ~) are
 * decoded, other percent-encodings have their hex upper-cased. Refused with
 * -EINVAL and the reason in err (never the path itself, which is the
 * sandbox's): a path not starting with '/', a dot segment ("." or "..",
 * also written "%2e", or followed by a ";" parameter), an encoded '/' or
 * '\' (%2F, %5C), a literal '\', an empty segment ("//"), a space or
 * control character (plain or percent-encoded), a plain non-ASCII
 * character, percent-encoded bytes past ASCII that are not well-formed
 * UTF-8 (overlong forms, surrogates, past U+10FFFF, cut short), '#', and a
 * '%' not followed by two hex digits. -ENOSPC when out is too small. */
int al_reqrule_path_normalize(const char *target, size_t len, char *out, size_t size,
			      struct al_error *err);

/* Hold a request to r: its method (method_len bytes), its normalised path
 * (path_len bytes) and its body size (content_length, -1 when not known in
 * advance, e.g. chunked: then only the caller can count it). Returns 0 when
 * allowed, 403 for a method or path the rule does not list, 413 for a body
 * over max_body; *why (may be NULL) gets a short static reason ("method not
 * allowed", "path not allowed", "body larger than max_body"). */
int al_reqrule_check(const struct al_reqrule *r, const char *method, size_t method_len,
		     const char *path, size_t path_len, int64_t content_length, const char **why);

/* A new string describing r for a host: "HOST methods=A,B paths=P,Q
 * max_body=N", leaving out the parts that allow everything. host may be
 * NULL (then the text starts at "methods="). Free with free(). */
char *al_reqrule_text(const struct al_reqrule *r, const char *host);

/* Free every field of r and zero it (r itself is the caller's). */
void al_reqrule_clear(struct al_reqrule *r);
