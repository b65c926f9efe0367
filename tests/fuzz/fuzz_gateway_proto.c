/* libFuzzer target: the decoder of the gateway process's messages
 * (gateway/proto.c). The gateway parses what the sandbox sends, so the
 * supervisor reads what it says as hostile. A decoded message re-encodes
 * to one that decodes the same. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gateway/proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct al_gwp_msg m, again;
	uint8_t out[AL_GWP_MAX];
	int n = -1;

	if (al_gwp_decode(data, size, &m, NULL) < 0) {
		if (m.fields || m.claim)
			__builtin_trap(); /* nothing handed out on failure */
		return 0;
	}
	switch (m.type) {
	case AL_GWP_LISTENER:
		if (m.kind >= AL_GATEWAY_N_LISTENERS)
			__builtin_trap();
		n = al_gwp_encode_listener((enum al_gateway_listener)m.kind, out, sizeof(out));
		break;
	case AL_GWP_PEERS:
		n = al_gwp_encode_peers(m.uid, out, sizeof(out));
		break;
	case AL_GWP_END:
		n = al_gwp_encode_end(out, sizeof(out));
		break;
	case AL_GWP_STARTED:
		if (strlen(m.text) >= sizeof(m.text))
			__builtin_trap();
		n = al_gwp_encode_started(m.error, m.landlock_abi, m.file_errno, m.text, out,
					  sizeof(out));
		break;
	case AL_GWP_AUDIT:
		if (!m.fields || !json_is_object(m.fields) || json_object_get(m.fields, "run"))
			__builtin_trap();
		n = al_gwp_encode_audit(m.event, m.fields, out, sizeof(out));
		if (n == -E2BIG) { /* the compact form may be longer than what came */
			json_decref(m.fields);
			return 0;
		}
		break;
	case AL_GWP_CLAIM:
		/* Its description is checked JSON; each value lies inside the
		 * message, after it. */
		if (!m.claim || !json_is_object(m.claim))
			__builtin_trap();
		for (size_t i = 0; i < json_array_size(json_object_get(m.claim, "secrets")); i++)
			if (m.claim_value[i].len == 0 ||
			    (size_t)m.claim_value[i].off + m.claim_value[i].len + 8 > size)
				__builtin_trap();
		json_decref(m.claim);
		return 0;
	case AL_GWP_CLAIMED:
		n = al_gwp_encode_claimed(m.error, m.text, out, sizeof(out));
		break;
	case AL_GWP_STATS:
		n = al_gwp_encode_stats(&m.stats, out, sizeof(out));
		break;
	case AL_GWP_USAGE:
		if (!m.usage.host[0] || strlen(m.usage.host) > AL_HOST_MAX ||
		    m.usage.requests == 0 || m.usage.requests > AL_GWP_MAX_USE_REQUESTS)
			__builtin_trap();
		for (const char *h = m.usage.host; *h; h++)
			if (*h <= ' ' || *h > '~')
				__builtin_trap();
		n = al_gwp_encode_usage(&m.usage, out, sizeof(out));
		break;
	case AL_GWP_SPENT:
		n = al_gwp_encode_spent(m.spent, out, sizeof(out));
		break;
	case AL_GWP_DEADLINE:
		if (m.deadline < 1 || m.deadline > AL_GWP_DEADLINE_MAX)
			__builtin_trap(); /* the decoder refuses what is out of range */
		n = al_gwp_encode_deadline(m.deadline, out, sizeof(out));
		break;
	case AL_GWP_REFUSAL:
		if (!m.refusal.why[0] || m.refusal.port > 65535 ||
		    strlen(m.refusal.host) > AL_HOST_MAX)
			__builtin_trap();
		n = al_gwp_encode_refusal(&m.refusal, out, sizeof(out));
		break;
	case AL_GWP_CHARGE:
		if (!m.charge.host[0] || m.charge.requests > AL_GWP_MAX_USE_REQUESTS ||
		    (m.charge.flags & ~(uint32_t)AL_GWP_CHARGE_EXHAUSTED))
			__builtin_trap();
		for (const char *h = m.charge.host; *h; h++)
			if (*h <= ' ' || *h > '~')
				__builtin_trap();
		n = al_gwp_encode_charge(&m.charge, out, sizeof(out));
		break;
	}
	if (n <= 0 || al_gwp_decode(out, (size_t)n, &again, NULL) < 0 || again.type != m.type)
		__builtin_trap();
	if (m.type == AL_GWP_STATS && memcmp(&m.stats, &again.stats, sizeof(m.stats)) != 0)
		__builtin_trap();
	if (m.type == AL_GWP_DEADLINE && m.deadline != again.deadline)
		__builtin_trap();
	if (m.type == AL_GWP_PEERS && m.uid != again.uid)
		__builtin_trap();
	if (m.type == AL_GWP_USAGE &&
	    (strcmp(m.usage.host, again.usage.host) != 0 ||
	     m.usage.requests != again.usage.requests || m.usage.bytes_up != again.usage.bytes_up ||
	     m.usage.bytes_down != again.usage.bytes_down))
		__builtin_trap();
	if (m.type == AL_GWP_REFUSAL &&
	    (m.refusal.kind != again.refusal.kind || m.refusal.port != again.refusal.port ||
	     strcmp(m.refusal.secret, again.refusal.secret) != 0 ||
	     strcmp(m.refusal.why, again.refusal.why) != 0 ||
	     strcmp(m.refusal.host, again.refusal.host) != 0))
		__builtin_trap();
	if (m.type == AL_GWP_SPENT && m.spent != again.spent)
		__builtin_trap();
	if (m.type == AL_GWP_CHARGE &&
	    (strcmp(m.charge.host, again.charge.host) != 0 ||
	     m.charge.requests != again.charge.requests ||
	     m.charge.bytes_up != again.charge.bytes_up || m.charge.flags != again.charge.flags))
		__builtin_trap();
	if (m.type == AL_GWP_AUDIT &&
	    (strcmp(m.event, again.event) != 0 || !json_equal(m.fields, again.fields)))
		__builtin_trap();
	json_decref(m.fields);
	json_decref(again.fields);
	return 0;
}
