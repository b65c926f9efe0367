/* The guest agent's reader of /airlock/config (the format is in
 * src/guest/config.h; al_guest_config_format() writes it). Pure: libc only,
 * built into the static agent and into libairlock (for the unit test). */
#pragma once

#include "guest/config.h"

#define AL_GUEST_CONFIG_MAX_MODULES 32
#define AL_GUEST_CONFIG_MAX_INPUTS  64
#define AL_GUEST_CONFIG_MAX_PORTS   16
#define AL_GUEST_CONFIG_MAX_MOUNTS  96
#define AL_GUEST_CONFIG_MAX_GROUPS  32

/* A parsed config: c's pointers point into the arrays here and into the
 * text given to al_guest_config_parse() (which must outlive it). */
struct al_guest_config_parsed {
	struct al_guest_config c;
	const char *modules[AL_GUEST_CONFIG_MAX_MODULES];
	struct al_guest_input inputs[AL_GUEST_CONFIG_MAX_INPUTS];
	uint16_t proxy_ports[AL_GUEST_CONFIG_MAX_PORTS];
	uint16_t capture_ports[AL_GUEST_CONFIG_MAX_PORTS];
	struct al_guest_mount mounts[AL_GUEST_CONFIG_MAX_MOUNTS];
	gid_t groups[AL_GUEST_CONFIG_MAX_GROUPS];
};

/* Parses text[0..len) in place (tabs and newlines become NULs): 0, or
 * -EINVAL with a message naming the line and what is wrong in err (a
 * record with an unknown key or the wrong number of fields, a number out
 * of range, a relative path, a record repeated that may appear once, too
 * many of a list, no root, channel, scratch or ids record). */
int al_guest_config_parse(char *text, size_t len, struct al_guest_config_parsed *out, char *err,
			  size_t errlen);
