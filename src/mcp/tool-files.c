/* The file tools: write_file, read_file and list_files, through the
 * daemon's file API (no link followed, the sandbox user's rights). */
#include "mcp/internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/util.h"

#define FILE_TIMEOUT_MS 120000
/* The most entries the daemon's file API lists of one directory
 * (src/serve/sfiles.c). */
#define DAEMON_LIST_MAX 10000

static int b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

char *mcp_base64_decode(const char *s, size_t len, size_t *out_len)
{
	size_t pad = 0;

	if (len % 4)
		return NULL;
	while (pad < 2 && pad < len && s[len - 1 - pad] == '=')
		pad++;
	char *out = xmalloc(len / 4 * 3 + 1);
	size_t n = 0;
	for (size_t i = 0; i < len; i += 4) {
		uint32_t v = 0;
		for (size_t k = 0; k < 4; k++) {
			int d = i + k >= len - pad ? 0 : b64_value(s[i + k]);
			if (d < 0) {
				free(out);
				return NULL;
			}
			v = v << 6 | (uint32_t)d;
		}
		out[n++] = (char)(v >> 16);
		out[n++] = (char)(v >> 8);
		out[n++] = (char)v;
	}
	/* The bits a padded group does not use must be 0 ("QR==" is not
	 * base64 of anything: corrupt or cut input, not read as "A"). */
	if ((pad >= 1 && out[n - 1] != 0) || (pad == 2 && out[n - 2] != 0)) {
		free(out);
		return NULL;
	}
	*out_len = n - pad;
	return out;
}

/* n bytes in standard base64 (OpenSSL's encoder, as the daemon's
 * sexec.c uses; n is at most the file API's 32 MiB). */
static char *base64_encode(const char *p, size_t n)
{
	char *out = xmalloc((n + 2) / 3 * 4 + 1);

	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)p, (int)n);
	return out;
}

/* "/files/" and the sandbox path without its leading slash, each byte
 * that is not unreserved or '/' percent-encoded. */
static char *files_suffix(const char *path, const char *query)
{
	size_t n = strlen(path);
	char *out = xmalloc(8 + 3 * n + strlen(query) + 1), *o = out;

	o += sprintf(o, "/files/");
	for (const char *p = path + 1; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    strchr("-._~/", c))
			*o++ = (char)c;
		else
			o += sprintf(o, "%%%02X", c);
	}
	strcpy(o, query);
	return out;
}

/* The daemon's error answer (a JSON body) for a raw request. */
static json_t *failed_raw(const char *tool, struct al_mcp_http_answer *a)
{
	json_t *ans = json_loadb(a->body, a->body_len, 0, NULL);
	json_t *r = mcp_result_failed(tool, mcp_daemon_error_text(a->status, ans));
	json_decref(ans);
	return r;
}

/* Make each directory above path (a 409, there already, is fine). */
static void make_parents(struct mcp *m, const char *path)
{
	char *dir = xstrdup(path);
	char *note;

	for (char *p = strchr(dir + 1, '/'); p; p = strchr(p + 1, '/')) {
		struct al_mcp_http_answer a = {0};
		*p = '\0';
		char *suffix = files_suffix(dir, "?mkdir=1");
		json_t *res = mcp_sandbox_raw(m, "write_file", "PUT", suffix, NULL, 0, NULL,
					      FILE_TIMEOUT_MS, &a, &note);
		free(suffix);
		free(note);
		json_decref(res);
		al_mcp_http_answer_clear(&a);
		*p = '/';
	}
	free(dir);
}

json_t *mcp_write_file(struct mcp *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	json_t *content = json_object_get(args, "content");
	const char *enc = json_string_value(json_object_get(args, "encoding")) ?: "utf-8";
	struct al_mcp_http_answer a = {0};
	char *data, *suffix = files_suffix(path, ""), *note = NULL;
	size_t len;
	json_t *res;

	if (strcmp(enc, "base64") == 0)
		data = mcp_base64_decode(json_string_value(content), json_string_length(content),
					 &len);
	else
		data = xstrdup(json_string_value(content)), len = json_string_length(content);
	for (int attempt = 0; attempt < 2; attempt++) {
		free(note);
		res = mcp_sandbox_raw(m, "write_file", "PUT", suffix, data, len,
				      "application/octet-stream", FILE_TIMEOUT_MS, &a, &note);
		if (res || a.status != 404 || attempt > 0)
			break;
		al_mcp_http_answer_clear(&a);
		make_parents(m, path);
	}
	free(data);
	free(suffix);
	if (!res && a.status != 201) {
		res = failed_raw("write_file", &a);
	} else if (!res) {
		char *text =
		    xasprintf("%s%swrote %zu bytes to %s", note ?: "", note ? "\n" : "", len, path);
		res = mcp_result(json_pack("{s:s, s:I}", "path", path, "size", (json_int_t)len),
				 text, false);
	}
	free(note);
	al_mcp_http_answer_clear(&a);
	return res;
}

static bool is_json(struct al_mcp_http_answer *a)
{
	return strncmp(a->content_type, "application/json", 16) == 0;
}

json_t *mcp_read_file(struct mcp *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path"));
	const char *enc = json_string_value(json_object_get(args, "encoding")) ?: "utf-8";
	struct al_mcp_http_answer a = {0};
	char *suffix = files_suffix(path, ""), *note = NULL;
	json_t *res = mcp_sandbox_raw(m, "read_file", "GET", suffix, NULL, 0, NULL, FILE_TIMEOUT_MS,
				      &a, &note);

	free(suffix);
	if (res) {
	} else if (a.status != 200) {
		res = failed_raw("read_file", &a);
	} else if (is_json(&a)) {
		res = mcp_result_failed("read_file",
					xasprintf("%s is a directory (list_files lists it)", path));
	} else {
		json_t *content;
		if (strcmp(enc, "base64") == 0) {
			char *b = base64_encode(a.body, a.body_len);
			content = json_string(b);
			free(b);
		} else {
			content = json_stringn(a.body, a.body_len);
		}
		if (!content) {
			res = mcp_result_failed("read_file",
						xasprintf("%s is not UTF-8 text: read it with "
							  "\"encoding\": \"base64\"",
							  path));
		} else {
			/* The text shows the first MCP_TEXT_SECTION_MAX bytes: a file
			 * of megabytes would fill the model's context (and, as JSON,
			 * the server's memory twice over). */
			char *text = xasprintf("%s%s%s (%zu bytes, %s):\n", note ?: "",
					       note ? "\n" : "", path, a.body_len, enc);
			mcp_text_section(&text, "content", "content", json_string_value(content),
					 json_string_length(content), false);
			res = mcp_result(json_pack("{s:s, s:s, s:o, s:I}", "path", path, "encoding",
						   enc, "content", content, "size",
						   (json_int_t)a.body_len),
					 text, false);
		}
	}
	free(note);
	al_mcp_http_answer_clear(&a);
	return res;
}

json_t *mcp_list_files(struct mcp *m, json_t *args)
{
	const char *path = json_string_value(json_object_get(args, "path")) ?: "/work";
	struct al_mcp_http_answer a = {0};
	char *suffix = files_suffix(path, ""), *note = NULL;
	json_t *res = mcp_sandbox_raw(m, "list_files", "GET", suffix, NULL, 0, NULL,
				      FILE_TIMEOUT_MS, &a, &note);
	json_t *ans = NULL, *entries, *e;
	size_t i;

	free(suffix);
	if (res)
		goto out;
	if (a.status != 200) {
		res = failed_raw("list_files", &a);
		goto out;
	}
	ans = is_json(&a) ? json_loadb(a.body, a.body_len, 0, NULL) : NULL;
	entries = json_object_get(ans, "entries");
	if (!json_is_array(entries)) {
		res = mcp_result_failed("list_files",
					xasprintf("%s is a file (read_file reads it)", path));
		goto out;
	}
	/* The daemon lists at most DAEMON_LIST_MAX entries; the text shows
	 * MCP_TEXT_LINES_MAX, each name escaped (sandboxed code names the
	 * files: a name with a newline must not make a line of its own). */
	size_t n = json_array_size(entries);
	char *text = xasprintf("%s%s%s: %zu entries%s\n", note ?: "", note ? "\n" : "", path, n,
			       n >= DAEMON_LIST_MAX ? " (the daemon lists no more: there may be "
						      "others)"
						    : "");
	json_array_foreach(entries, i, e)
	{
		if (i == MCP_TEXT_LINES_MAX) {
			mcp_text_append(&text, "[%zu more; structuredContent.entries has all]\n",
					n - i);
			break;
		}
		const char *type = json_string_value(json_object_get(e, "type")) ?: "?";
		const char *name = json_string_value(json_object_get(e, "name")) ?: "?";
		char *shown = mcp_text_escape(name, strlen(name));
		mcp_text_append(&text, "%-7s %10lld  %s%s\n", type,
				(long long)json_integer_value(json_object_get(e, "size")), shown,
				strcmp(type, "dir") == 0 ? "/" : "");
		free(shown);
	}
	res = mcp_result(json_pack("{s:s, s:O}", "path", path, "entries", entries), text, false);
out:
	free(note);
	json_decref(ans);
	al_mcp_http_answer_clear(&a);
	return res;
}
