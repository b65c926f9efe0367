#include "net/layout.h"

const struct al_listener_info al_gateway_listeners[AL_GATEWAY_N_LISTENERS] = {
    [AL_GATEWAY_HTTP] = {"http proxy", AL_GATEWAY_HTTP_PORT, true, true},
    [AL_GATEWAY_SOCKS] = {"socks proxy", AL_GATEWAY_SOCKS_PORT, true, true},
    [AL_GATEWAY_DNS_UDP] = {"dns (udp)", AL_GATEWAY_DNS_PORT, false, true},
    [AL_GATEWAY_DNS_TCP] = {"dns (tcp)", AL_GATEWAY_DNS_PORT, true, true},
    [AL_GATEWAY_TRANSPARENT] = {"transparent capture", AL_GATEWAY_TRANSPARENT_PORT, true, false},
};
