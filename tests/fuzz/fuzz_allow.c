/* libFuzzer target: allowlist rules and host names (net/allow.c). Rules
 * come from the policy, but names checked against them come from the
 * sandbox. Each input line is tried as a rule, as a host and as a name to
 * match; a parsed host must parse again to itself. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/cleanup.h"
#include "net/allow.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void line(struct al_allowlist *l, const char *s, size_t len)
{
	struct al_host h, again;
	struct al_error err = {0};

	(void)al_allow_add(l, s, &err);
	if (al_host_parse(s, len, &h, NULL) == 0) {
		if (al_host_parse(h.text, strlen(h.text), &again, NULL) != 0 ||
		    strcmp(again.text, h.text) != 0 || again.kind != h.kind ||
		    memcmp(&again.addr, &h.addr, sizeof(h.addr)) != 0)
			__builtin_trap();
		(void)al_addr_class(&h.addr);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_cleanup_(al_allow_freep) struct al_allowlist *l = al_allow_new();
	static const uint16_t ports[] = {80, 443, 8080, 1, 65535};
	const struct al_allow_rule *rule;
	char buf[512];
	size_t start = 0;

	if (size > 8192)
		return 0;
	for (size_t i = 0; i <= size && al_allow_count(l) < 64; i++) {
		size_t len = i - start;

		if (i < size && data[i] != '\n')
			continue;
		if (len < sizeof(buf)) {
			memcpy(buf, data + start, len);
			buf[len] = '\0';
			line(l, buf, len);
		}
		start = i + 1;
	}
	start = 0;
	for (size_t i = 0; i <= size; i++) {
		size_t len = i - start;

		if (i < size && data[i] != '\n')
			continue;
		if (len < sizeof(buf)) {
			memcpy(buf, data + start, len);
			buf[len] = '\0';
			for (size_t p = 0; p < AL_ARRAY_SIZE(ports); p++)
				if (al_allow_match_name(l, buf, ports[p], &rule) &&
				    !al_allow_rule_text(rule)[0])
					__builtin_trap();
		}
		start = i + 1;
	}
	for (size_t i = 0; i + 16 <= size; i += 16) {
		struct in6_addr a;

		memcpy(&a, data + i, 16);
		(void)al_addr_class(&a);
		(void)al_allow_match_addr(l, &a, 443, &rule);
	}
	return 0;
}
