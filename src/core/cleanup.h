/* Scope-bound cleanup on top of __attribute__((cleanup)), as in bubblewrap,
 * crun and systemd. Initialise every cleanup variable
 * where it is declared; move ownership out with TAKE_PTR()/TAKE_FD(). */
#pragma once

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void al_freep(void *p)
{
	free(*(void **)p);
}

/* Close *fd if open and mark it closed (-1). */
static inline void al_closep(int *fd)
{
	if (*fd >= 0) {
		int saved = errno;
		close(*fd);
		errno = saved;
		*fd = -1;
	}
}

static inline void al_fclosep(FILE **f)
{
	if (*f)
		fclose(*f);
}

#define _cleanup_(f)	 __attribute__((cleanup(f)))
#define _cleanup_free_	 _cleanup_(al_freep)
#define _cleanup_close_	 _cleanup_(al_closep)
#define _cleanup_fclose_ _cleanup_(al_fclosep)

#define TAKE_PTR(p)                                                                                \
	({                                                                                         \
		__typeof__(p) _tp = (p);                                                           \
		(p) = NULL;                                                                        \
		_tp;                                                                               \
	})

#define TAKE_FD(fd)                                                                                \
	({                                                                                         \
		int _tf = (fd);                                                                    \
		(fd) = -1;                                                                         \
		_tf;                                                                               \
	})

#define AL_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
