/* libFuzzer target: the guest's side of a microvm channel (src/guest/
 * proto.h), every byte hostile, fed to the VMM's decoder and message
 * handling (src/backend/microvm/vmm-chan.c, vmm-relay.c, vmm-files.c) in
 * dry mode: no QEMU, no connection made (an OPEN the rules allow is
 * answered OPEN_OK with no socket, its DATA taken and acknowledged), no
 * file written. The harness says HELLO first (so that inputs start past
 * the boot), then feeds the input in pieces of the sizes its first byte
 * picks, moving the VMM's queues on after each piece: the queue to the
 * guest into /dev/null, the guest's output into a fresh non-blocking pipe
 * that nobody reads (it fills, so the windows are what bounds them).
 * Checked after every step: no buffer past its bound (the decoder's, the
 * queue to the guest, stdout and stderr, each connection's), at most
 * AL_GUEST_MAX_STREAMS connections; and no leak (LeakSanitizer). */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "backend/microvm/vmm-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *argv_[] = {"/bin/true", NULL};
static char *env_[] = {"A=1", NULL};
static char cwd_[] = "/work";

static void check(const struct vmm *v)
{
	size_t streams = 0;
	if (v->in_len > VMM_IN_CAP || v->out.len > VMM_OUT_CAP ||
	    v->out.off + v->out.len > v->out.cap)
		__builtin_trap();
	for (size_t k = 0; k < AL_GUEST_MAX_EXECS; k++)
		for (int i = 0; v->execs[k] && i < 2; i++)
			if (v->execs[k]->stdio[i].len > AL_GUEST_WINDOW ||
			    v->execs[k]->stdio[i].cap != AL_GUEST_WINDOW ||
			    v->execs[k]->stdin_credit > AL_GUEST_WINDOW)
				__builtin_trap();
	for (size_t i = 0; i < AL_GUEST_MAX_STREAMS; i++) {
		if (!v->streams[i])
			continue;
		streams++;
		if (v->streams[i]->to.len > AL_GUEST_WINDOW ||
		    v->streams[i]->credit > AL_GUEST_WINDOW)
			__builtin_trap();
	}
	if (streams > AL_GUEST_MAX_STREAMS)
		__builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vmm_config cfg = {.argv = argv_,
					.env = env_,
					.cwd = cwd_,
					.boot_timeout_ms = 1000,
					.silence_ms = 1000,
					.network = true,
					.copy_out = true,
					.out_bytes = 1 << 20,
					.out_files = 100};
	static struct vmm v;
	if (size == 0)
		return 0;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC), out[2];
	if (null < 0 || pipe2(out, O_NONBLOCK | O_CLOEXEC) < 0)
		abort();
	vmm_init(&v, &cfg, null, true);
	v.fd_in = -1;
	v.fd_out[0] = v.fd_out[1] = out[1];

	uint8_t hello[AL_GUEST_HEADER + 8];
	al_guest_hdr_put(hello, AL_G_HELLO, 0, 0, 8);
	al_guest_put32(hello + AL_GUEST_HEADER, AL_GUEST_PROTO_VERSION);
	al_guest_put32(hello + AL_GUEST_HEADER + 4, 0x7a7a7a7a);
	vmm_feed(&v, hello, sizeof(hello));

	/* Pieces of 1 to 64 bytes, or whole, by the first byte. */
	size_t piece = data[0] & 0x40 ? size : (size_t)(data[0] & 0x3f) + 1;
	data++, size--;
	while (!v.failed) {
		size_t n = vmm_feed(&v, data, size < piece ? size : piece);
		data += n, size -= n;
		vmm_handle_input(&v);
		check(&v);
		if (v.failed)
			break;
		vmm_flush(&v);
		vmm_pump(&v);
		check(&v);
		if (size == 0 && (v.in_len < AL_GUEST_HEADER || n == 0))
			break; /* nothing more to take, or the rest an incomplete frame */
	}
	vmm_free(&v);
	close(null);
	close(out[0]);
	close(out[1]);
	return 0;
}
