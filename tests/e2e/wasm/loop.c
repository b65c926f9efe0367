/* The wasm e2e suite's endless loop, stopped only by the run's timeout. */
int main(void)
{
	volatile unsigned long n = 0;

	for (;;)
		n++;
}
