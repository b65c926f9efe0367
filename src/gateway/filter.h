/* The filtered stream (filter.c, filter-pump.c; internal to src/gateway):
 * a connection read request by request, in plain HTTP or through TLS the
 * gateway terminates. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"
#include "gateway/conn.h"

/* Make c's filter (c->filter): its rule, the secrets scoped to it, the
 * run's needles; with tls, the two TLS ends. proxy_form: requests come in
 * absolute-form (the HTTP proxy). */
int gw_filter_new(struct conn *c, bool tls, bool proxy_form, struct al_error *err);
/* Client bytes read before the stream started (a head, a ClientHello):
 * how many it took (as many as fit now), or -ENOBUFS. */
int gw_filter_take(struct conn *c, const char *buf, size_t len);
void gw_filter_free(struct conn *c);

extern const struct gw_stream_ops gw_stream_filter;
