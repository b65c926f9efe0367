/* The OCI runtime's log (oci.h): runc's formats, one write a line. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/sys.h"
#include "core/util.h"
#include "oci/oci.h"

/* The process's one log: a verb's, or a supervisor's (set before it
 * forks anything, read by its one thread). */
static int log_fd = -1;
static bool log_json;

void al_oci_log_line(enum al_log_level level, const char *msg)
{
	static const char *const names[] = {"error", "warning", "info", "debug"};
	char ts[64];
	struct timespec now;
	struct tm tm;
	char *line;

	if (log_fd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (log_json) {
		json_t *o =
		    json_pack("{s:s, s:s, s:s}", "level", names[level], "msg", msg, "time", ts);
		char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
		line = xasprintf("%s\n", t ? t : "{}");
		free(t);
		json_decref(o);
	} else {
		json_t *s = json_string(msg);
		char *q = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
		line = xasprintf("time=\"%s\" level=%s msg=%s\n", ts, names[level], q ? q : "\"\"");
		free(q);
		json_decref(s);
	}
	(void)al_write_all(log_fd, line, strlen(line)); /* nowhere else to say it */
	free(line);
}

void al_oci_log_open(int fd, bool json)
{
	log_fd = fd;
	log_json = json;
	al_log_set_sink(al_oci_log_line);
}

void al_oci_log_to(int fd)
{
	log_fd = fd;
}
