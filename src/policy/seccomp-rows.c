/* Lookups over the generated program's row table (seccomp-program.c); kept
 * apart from seccomp.c, which the generator itself links. */
#include "policy/seccomp.h"

const struct al_seccomp_rule_info *al_seccomp_row_for(int nr)
{
	size_t n;
	const struct al_seccomp_rule_info *table = al_seccomp_table(&n);

	for (size_t i = 0; i < n; i++)
		if (al_seccomp_row_nr[i] == nr && table[i].notify)
			return &table[i];
	return NULL;
}
