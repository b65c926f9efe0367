/* airlock vm-image [--packages P,P,...]: build (or find in the cache) the
 * read-only system image that microvm and vm guests boot with, ahead of a
 * run, and print its path and size. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/microvm/image.h"
#include "cli.h"
#include "core/cleanup.h"
#include "core/log.h"
#include "core/util.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: airlock vm-image [--packages P,P,...]\n\n"
		   "Build the system image that microvm and vm guests boot with, from the\n"
		   "host's installed files of Debian packages and everything they depend\n"
		   "on, or find it in " AL_VM_CACHE_DIR ", and print its path and size.\n"
		   "A run builds it when it is missing; this builds it ahead of time.\n\n"
		   "  --packages P,P,...   the packages (default: python3,python3-pandas,\n"
		   "                       coreutils,bash,dash,libc-bin)\n");
}

/* A Debian package name: lower-case letters, digits, '+', '-' and '.',
 * starting with a letter or digit. */
static bool package_name(const char *s)
{
	if (!isalnum((unsigned char)s[0]))
		return false;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) &&
		    !strchr("+-.", *s))
			return false;
	return true;
}

int al_cmd_vm_image(int argc, char **argv)
{
	_cleanup_(al_strv_freep) char **pkgs = NULL;
	for (int i = 0; i < argc; i++) {
		const char *list = NULL;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strncmp(argv[i], "--packages=", 11) == 0) {
			list = argv[i] + 11;
		} else if (strcmp(argv[i], "--packages") == 0 && i + 1 < argc) {
			list = argv[++i];
		} else {
			al_err("vm-image: unknown argument \"%s\" (see airlock vm-image --help)",
			       argv[i]);
			return 125;
		}
		_cleanup_free_ char *copy = xstrdup(list);
		char *save = NULL;
		for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
			if (!package_name(p)) {
				al_err("vm-image: --packages: \"%s\" is not a Debian package name",
				       p);
				return 125;
			}
			al_strv_push(&pkgs, p);
		}
		if (!pkgs) {
			al_err("vm-image: --packages: no package named");
			return 125;
		}
	}
	char path[4096];
	struct al_error err = {0};
	if (al_vm_system_image((const char *const *)pkgs, path, sizeof(path), &err) < 0) {
		al_err("vm-image: %s", err.msg);
		return 1;
	}
	struct stat st;
	if (stat(path, &st) < 0) {
		al_err("vm-image: %s: %m", path);
		return 1;
	}
	char size[32];
	al_format_size((uint64_t)st.st_size, size, sizeof(size));
	printf("%s\t%s\n", path, size);
	return fflush(stdout) == 0 ? 0 : 1;
}
