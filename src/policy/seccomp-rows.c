/* Lookups over the generated call index (seccomp-program.c); kept apart
 * from seccomp.c, which the generator itself links. */
#include "policy/seccomp.h"

#include <errno.h>

int al_seccomp_answer(int nr, const char **ret_name)
{
	size_t lo = 0, hi = al_seccomp_n_calls;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct al_seccomp_call *c = &al_seccomp_calls[mid];
		if (c->nr == nr) {
			size_t n;
			const struct al_seccomp_rule_info *table = al_seccomp_table(&n);
			if (c->row < 0 || (size_t)c->row >= n) {
				*ret_name = c->name;
				return ENOSYS;
			}
			*ret_name = table[c->row].syscall;
			return table[c->row].errno_value;
		}
		if (c->nr < nr)
			lo = mid + 1;
		else
			hi = mid;
	}
	*ret_name = NULL;
	return ENOSYS;
}
