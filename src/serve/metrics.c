/* The monitor's counters and their Prometheus text format. */
#include "serve/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cleanup.h"
#include "core/util.h"
#include "run/session.h"
#include "supervisor/result.h"

/* Seconds: the upper bounds of the latency histograms' buckets. */
static const double bounds[AL_HIST_BUCKETS] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
					       0.5,   1,    2.5,   5,	 10,  30};

void al_metrics_status(struct al_metrics *m, unsigned status)
{
	m->requests[status >= 100 && status < 600 ? status / 100 : 0]++;
	if (status < 600)
		m->status[status]++;
}

void al_hist_add(struct al_hist *h, double s)
{
	size_t i = 0;

	while (i < AL_HIST_BUCKETS && s > bounds[i])
		i++;
	h->counts[i]++;
	h->n++;
	h->sum += s;
}

/* The reasons that are a limit's, by their name in the result record. */
static const enum al_end_reason limits[] = {AL_END_TIMEOUT,  AL_END_MEMORY, AL_END_PIDS,
					    AL_END_CPU_TIME, AL_END_OUTPUT, AL_END_BUDGET};

int al_metrics_limit_index(const char *reason)
{
	for (size_t i = 0; reason && i < AL_ARRAY_SIZE(limits); i++)
		if (strcmp(reason, al_reason_name(limits[i])) == 0)
			return (int)limits[i];
	return -1;
}

static const char *const kinds[AL_DENIAL_N] = {"network", "dns", "cut", "secret", "syscall"};

const char *al_denial_kind_name(int kind)
{
	return kind >= 0 && kind < AL_DENIAL_N ? kinds[kind] : "unknown";
}

/* What the exec streams report as a denial: a refused connection,
 * request or name, a cut connection, a denied syscall, a secret misused. */
int al_denial_kind_of(const char *event, json_t *fields)
{
	const char *d = json_string_value(json_object_get(fields, "decision"));

	if (strcmp(event, "syscall.denied") == 0)
		return AL_DENIAL_SYSCALL;
	if (strcmp(event, "secret.misuse") == 0)
		return AL_DENIAL_SECRET;
	if (d && strcmp(d, "cut") == 0)
		return AL_DENIAL_CUT;
	if (d && strcmp(d, "deny") == 0)
		return strcmp(event, "net.dns") == 0 ? AL_DENIAL_DNS : AL_DENIAL_NETWORK;
	return -1;
}

int al_metrics_event(struct al_metrics *m, const struct al_msg *in, bool *paused)
{
	_cleanup_free_ char *name = al_msg_strdup(in, AL_TAG_REASON);
	int li = al_metrics_limit_index(name);

	switch (al_msg_u32(in, AL_TAG_EVENT, 0)) {
	case AL_SEV_EXEC:
		for (int r = 0; name && r < AL_EXEC_REASONS; r++)
			if (strcmp(name, al_exec_reason_name((enum al_exec_reason)r)) == 0)
				m->execs[r]++;
		/* An exec's own timeout, memory or output limit. */
		if (li >= 0 && (size_t)li < AL_ARRAY_SIZE(m->limit_hits))
			m->limit_hits[li]++;
		al_hist_add(&m->exec_s, (double)al_msg_u64(in, AL_TAG_US, 0) / 1e6);
		return 0;
	case AL_SEV_DENIAL:
		for (int k = 0; name && k < AL_DENIAL_N; k++)
			if (strcmp(name, kinds[k]) == 0)
				m->denials[k] += al_msg_u64(in, AL_TAG_DENIALS, 0);
		return 0;
	case AL_SEV_PAUSED:
	case AL_SEV_RESUMED:
		*paused = al_msg_u32(in, AL_TAG_EVENT, 0) == AL_SEV_PAUSED;
		return 0;
	case AL_SEV_LIMIT:
		if (li >= 0 && (size_t)li < AL_ARRAY_SIZE(m->limit_hits))
			m->limit_hits[li]++;
		return 0;
	default:
		return -EBADMSG;
	}
}

void al_hist_text(FILE *f, const char *name, const char *labels, const struct al_hist *h)
{
	const char *sep = labels[0] ? "," : "";
	uint64_t cum = 0;

	for (size_t i = 0; i < AL_HIST_BUCKETS; i++) {
		cum += h->counts[i];
		fprintf(f, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, bounds[i],
			(unsigned long long)cum);
	}
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
		(unsigned long long)h->n);
	if (labels[0])
		fprintf(f, "%s_sum{%s} %.6f\n%s_count{%s} %llu\n", name, labels, h->sum, name,
			labels, (unsigned long long)h->n);
	else
		fprintf(f, "%s_sum %.6f\n%s_count %llu\n", name, h->sum, name,
			(unsigned long long)h->n);
}

static void hist(FILE *f, const char *name, const char *help, const struct al_hist *h)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	al_hist_text(f, name, "", h);
}

char *al_metrics_text(const struct al_metrics *m, unsigned running, unsigned paused, unsigned ready,
		      unsigned clients)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return NULL;
	fprintf(
	    f,
	    "# HELP airlock_sandboxes Sandboxes the daemon holds, by state.\n"
	    "# TYPE airlock_sandboxes gauge\n"
	    "airlock_sandboxes{state=\"running\"} %u\n"
	    "airlock_sandboxes{state=\"paused\"} %u\n"
	    "airlock_sandboxes{state=\"ready\"} %u\n"
	    "# HELP airlock_clients Client connections open.\n"
	    "# TYPE airlock_clients gauge\n"
	    "airlock_clients %u\n"
	    "# HELP airlock_clients_refused_total Connections closed at once past --max-clients.\n"
	    "# TYPE airlock_clients_refused_total counter\n"
	    "airlock_clients_refused_total %llu\n",
	    running, paused, ready, clients, (unsigned long long)m->refused_clients);
	fprintf(f, "# HELP airlock_requests_total API requests answered, by status.\n"
		   "# TYPE airlock_requests_total counter\n");
	for (unsigned s = 100; s < 600; s++)
		if (m->status[s])
			fprintf(f, "airlock_requests_total{status=\"%u\"} %llu\n", s,
				(unsigned long long)m->status[s]);
	fprintf(f,
		"# HELP airlock_runs_total One-shot runs that ended.\n"
		"# TYPE airlock_runs_total counter\n"
		"airlock_runs_total %llu\n"
		"# HELP airlock_execs_total Execs in live sandboxes that ended, by reason.\n"
		"# TYPE airlock_execs_total counter\n",
		(unsigned long long)m->runs);
	for (int r = 0; r < AL_EXEC_REASONS; r++)
		fprintf(f, "airlock_execs_total{reason=\"%s\"} %llu\n",
			al_exec_reason_name((enum al_exec_reason)r),
			(unsigned long long)m->execs[r]);
	fprintf(f, "# HELP airlock_denials_total Things runs and sandboxes were refused, by "
		   "kind.\n"
		   "# TYPE airlock_denials_total counter\n");
	for (int k = 0; k < AL_DENIAL_N; k++)
		fprintf(f, "airlock_denials_total{kind=\"%s\"} %llu\n", kinds[k],
			(unsigned long long)m->denials[k]);
	fprintf(f, "# HELP airlock_limit_hits_total Runs, sandboxes and execs ended by a limit, "
		   "by reason.\n"
		   "# TYPE airlock_limit_hits_total counter\n");
	for (size_t i = 0; i < AL_ARRAY_SIZE(limits); i++)
		fprintf(f, "airlock_limit_hits_total{reason=\"%s\"} %llu\n",
			al_reason_name(limits[i]), (unsigned long long)m->limit_hits[limits[i]]);
	hist(f, "airlock_run_seconds", "One-shot runs, request to answer.", &m->run_s);
	hist(f, "airlock_create_seconds", "Sandbox creation, request to answer.", &m->create_s);
	hist(f, "airlock_exec_seconds",
	     "Execs in a sandbox, request to end (time paused included).", &m->exec_s);
	fprintf(f, "# HELP airlock_create_pool_seconds Sandbox creation, request to answer, by "
		   "whether it was claimed from the warm pool.\n"
		   "# TYPE airlock_create_pool_seconds histogram\n");
	al_hist_text(f, "airlock_create_pool_seconds", "pool=\"warm\"", &m->create_warm_s);
	al_hist_text(f, "airlock_create_pool_seconds", "pool=\"cold\"", &m->create_cold_s);
	fclose(f);
	return buf;
}
