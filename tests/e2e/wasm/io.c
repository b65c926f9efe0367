/* The wasm e2e suite's first module: reads the input file argv[1] (in a
 * preopened directory) and writes its lines upper-cased to argv[2] in the
 * scratch; prints how many bytes it copied. */
#include <ctype.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	FILE *in, *out;
	long n = 0;
	int c;

	if (argc != 3)
		return 2;
	if (!(in = fopen(argv[1], "r")) || !(out = fopen(argv[2], "w"))) {
		perror("open");
		return 1;
	}
	while ((c = fgetc(in)) != EOF && ++n)
		fputc(toupper(c), out);
	if (fclose(out) != 0)
		return 1;
	printf("copied %ld bytes\n", n);
	return 0;
}
