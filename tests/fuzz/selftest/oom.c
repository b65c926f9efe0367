/* A stand-in libFuzzer target for the fuzz suite's self-test: one malloc of
 * 128 MiB per input, over the -malloc_limit_mb=64 its test passes, so
 * run-fuzzer must fail with an out-of-memory artifact. The block is never
 * written (no memory is used beyond the mapping) and is freed when the limit
 * did not stop the run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void *volatile sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)data;
	sink = malloc((size_t)128 << 20 | (size & 1));
	free(sink);
	return 0;
}
