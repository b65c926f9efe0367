/* The wasm e2e suite's memory bomb: allocates 1 MiB blocks, touched and
 * kept on a list, until malloc fails (the cap) or 2 GiB, whichever first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct block {
	struct block *next;
	char data[(1 << 20) - sizeof(struct block *)];
};

int main(void)
{
	struct block *head = NULL;

	for (int i = 0; i < 2048; i++) {
		struct block *b = malloc(sizeof(*b));
		if (!b) {
			fprintf(stderr, "malloc failed after %d MiB\n", i);
			return 1;
		}
		memset(b->data, i, sizeof(b->data));
		b->next = head;
		head = b;
	}
	printf("kept %p\n", (void *)head);
	return 0;
}
