/* The row macros of the seccomp tables (policy/seccomp.c for the sandbox,
 * gateway/seccomp.c for the gateway process). */
#pragma once

#include <errno.h>

#include "policy/seccomp.h"

/* clang-format off */
#define M32 0xffffffffull /* a C int parameter */

#define ALLOW(n)          {n, AL_SECCOMP_ALLOW, 0, {{0}}, EPERM, NULL}
/* Allowed when every ARG(arg, mask, value) holds. */
#define ALLOW_IF(n, why, ...)                                                                      \
	{n, AL_SECCOMP_ALLOW,                                                                      \
	 sizeof((struct al_seccomp_cond[]){__VA_ARGS__}) / sizeof(struct al_seccomp_cond),         \
	 {__VA_ARGS__}, EPERM, why}
#define ARG(a, m, v)      {a, m, v}
#define DENY(n, why)      {n, AL_SECCOMP_DENY, 0, {{0}}, EPERM, why}
#define SILENT(n, e, why) {n, AL_SECCOMP_ERRNO, 0, {{0}}, e, why}
/* Sockets: family, type without SOCK_NONBLOCK/SOCK_CLOEXEC, protocol. */
#define SOCK_TYPE_BITS 0xfull
#define SOCKET(fam, type, proto)                                                                   \
	ALLOW_IF("socket", #fam ", " #type ", " #proto,                              \
		 ARG(0, M32, fam), ARG(1, SOCK_TYPE_BITS, type), ARG(2, M32, proto))
/* clang-format on */
