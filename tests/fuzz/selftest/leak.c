/* A stand-in libFuzzer target for the fuzz suite's self-test: 64 bytes lost
 * on every input, which LeakSanitizer reports, so run-fuzzer must fail with
 * a leak artifact. The loss is bounded by the number of inputs run before
 * the report stops the run. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Written and read through here so that the allocation is not optimised
 * away; cleared at once, so no pointer to the block is left anywhere. */
static void *volatile sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	sink = malloc(64);
	if (sink)
		memcpy(sink, data, size < 64 ? size : 64);
	sink = NULL;
	return 0;
}
