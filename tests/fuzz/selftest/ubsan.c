/* A stand-in libFuzzer target for the fuzz suite's self-test: a signed
 * overflow on every input, which only UndefinedBehaviorSanitizer sees, so
 * run-fuzzer must fail with its report. */
#include <limits.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* volatile: the compiler must not fold or drop the addition. */
	volatile int x = INT_MAX;

	(void)data;
	x = x + (int)(size % 2) + 1;
	return 0;
}
