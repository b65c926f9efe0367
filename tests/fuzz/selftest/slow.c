/* A stand-in libFuzzer target for the fuzz suite's self-test: every input
 * sleeps for 3 s (no CPU), over the -timeout=1 its test passes, so run-fuzzer
 * must fail with a timeout artifact. */
#include <stddef.h>
#include <stdint.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct timespec ts = {.tv_sec = 3};

	(void)data;
	(void)size;
	while (nanosleep(&ts, &ts) != 0)
		;
	return 0;
}
