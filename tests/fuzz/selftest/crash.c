/* A stand-in libFuzzer target for the fuzz suite's self-test: it crashes on
 * every input (libFuzzer runs one even over an empty corpus), so run-fuzzer
 * must report a crash artifact and fail. */
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	(void)data;
	(void)size;
	__builtin_trap();
}
