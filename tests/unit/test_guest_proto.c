/* guest/proto.c and guest/config.c: the channel's header bounds for every
 * type, EXEC's parser fed broken payloads, EXIT's round trip, the
 * FILE_BEGIN path check, and the guest config written and read back (and
 * refused where a value holds a tab or a newline). */
#include "unit.h"

#include <errno.h>
#include <stdlib.h>

#include "guest/config-parse.h"
#include "guest/proto.h"

static int hdr(uint8_t type, uint8_t flags, uint32_t len)
{
	uint8_t b[AL_GUEST_HEADER];
	struct al_guest_hdr h;
	al_guest_hdr_put(b, type, flags, 7, len);
	int r = al_guest_hdr_get(b, &h);
	if (r == 0) {
		assert_int_equal(h.type, type);
		assert_int_equal(h.id, 7);
		assert_int_equal(h.len, len);
	}
	return r;
}

static void test_header_bounds(void **state)
{
	(void)state;
	/* Every known type: its own bound passes, one more byte fails. */
	for (unsigned t = 1; t <= AL_G_TYPE_MAX; t++) {
		long max = al_guest_max_len((uint8_t)t);
		assert_true(max >= 0);
		assert_true(max <= (long)AL_GUEST_MAX_PAYLOAD);
		assert_int_equal(hdr((uint8_t)t, 0, (uint32_t)max), 0);
		assert_int_equal(hdr((uint8_t)t, 0, (uint32_t)max + 1), -EPROTO);
	}
	/* The tight ones. */
	assert_int_equal(al_guest_max_len(AL_G_EXIT), AL_GUEST_EXIT_LEN);
	assert_int_equal(al_guest_max_len(AL_G_PING), 8);
	assert_int_equal(al_guest_max_len(AL_G_WINDOW), 4);
	assert_int_equal(al_guest_max_len(AL_G_POWEROFF), 0);
	assert_int_equal(al_guest_max_len(AL_G_OPEN), 8);
	assert_int_equal(al_guest_max_len(AL_G_DGRAM), 4096);
	assert_int_equal(al_guest_max_len(AL_G_LOG), 1024);
	/* Unknown types. */
	assert_int_equal(al_guest_max_len(0), -1);
	assert_int_equal(al_guest_max_len(AL_G_TYPE_MAX + 1), -1);
	assert_int_equal(hdr(0, 0, 0), -EPROTO);
	assert_int_equal(hdr(AL_G_TYPE_MAX + 1, 0, 0), -EPROTO);
	assert_int_equal(hdr(255, 0, 0), -EPROTO);
	/* A len far over everything (the top bit set). */
	assert_int_equal(hdr(AL_G_DATA, 0, 0x80000000u), -EPROTO);
	/* Flags: only WINDOW's 0..3 and EXEC's file operation, or limits and
	 * tty. */
	assert_int_equal(hdr(AL_G_DATA, 1, 1), -EPROTO);
	assert_int_equal(hdr(AL_G_WINDOW, 3, 4), 0);
	assert_int_equal(hdr(AL_G_WINDOW, 4, 4), -EPROTO);
	assert_int_equal(hdr(AL_G_EXEC, AL_GUEST_EXEC_FILE_OP, 16), 0);
	assert_int_equal(hdr(AL_G_EXEC, AL_GUEST_EXEC_LIMITS, 16), 0);
	assert_int_equal(hdr(AL_G_EXEC, AL_GUEST_EXEC_TTY, 16), 0);
	assert_int_equal(hdr(AL_G_EXEC, AL_GUEST_EXEC_TTY | AL_GUEST_EXEC_LIMITS, 16), 0);
	assert_int_equal(hdr(AL_G_EXEC, 3, 16), -EPROTO);
	assert_int_equal(hdr(AL_G_EXEC, AL_GUEST_EXEC_FILE_OP | AL_GUEST_EXEC_TTY, 16), -EPROTO);
	assert_int_equal(hdr(AL_G_EXEC, 8, 16), -EPROTO);
	assert_int_equal(hdr(AL_G_EXEC_STARTED, AL_GUEST_EXEC_LIMITS, 4), -EPROTO);
	assert_int_equal(hdr(AL_G_EXEC_STARTED, AL_GUEST_EXEC_FILE_OP, 4), -EPROTO);
	assert_int_equal(hdr(AL_G_FILE_BEGIN, AL_GUEST_EXEC_FILE_OP, 8), -EPROTO);
	/* Reserved bits. */
	uint8_t b[AL_GUEST_HEADER];
	struct al_guest_hdr h;
	al_guest_hdr_put(b, AL_G_PING, 0, 1, 8);
	assert_int_equal(al_guest_hdr_get(b, &h), 0);
	b[3] = 1;
	assert_int_equal(al_guest_hdr_get(b, &h), -EPROTO);
	/* The byte order is little-endian. */
	al_guest_hdr_put(b, AL_G_DATA, 0, 0x01020304u, 0x0506);
	assert_int_equal(b[4], 4);
	assert_int_equal(b[7], 1);
	assert_int_equal(b[8], 6);
	assert_int_equal(b[9], 5);
}

/* An EXEC payload of counts na, ne and the given strings (each with its
 * NUL), in buf; its length. */
static uint32_t exec_payload(uint8_t *buf, uint32_t na, uint32_t ne, const char *const *s, size_t n)
{
	al_guest_put32(buf, na);
	al_guest_put32(buf + 4, ne);
	uint32_t off = 8;
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(s[i]) + 1;
		memcpy(buf + off, s[i], l);
		off += (uint32_t)l;
	}
	return off;
}

static void test_exec_parse(void **state)
{
	(void)state;
	static const char *argv[AL_GUEST_MAX_ARGS + 1], *env[AL_GUEST_MAX_ARGS + 1];
	static uint8_t buf[AL_GUEST_MAX_PAYLOAD];
	const char *cwd;
	uint32_t argc, envc;
	const char *s[] = {"/work", "/bin/echo", "hi", "PATH=/bin"};
	uint32_t len = exec_payload(buf, 2, 1, s, 4);
	assert_int_equal(al_guest_exec_parse(buf, len, &cwd, argv, &argc, env, &envc), 0);
	assert_string_equal(cwd, "/work");
	assert_int_equal(argc, 2);
	assert_int_equal(envc, 1);
	assert_string_equal(argv[1], "hi");
	assert_null(argv[2]);
	assert_string_equal(env[0], "PATH=/bin");
	assert_null(env[1]);
	/* The last string without its NUL. */
	assert_int_equal(al_guest_exec_parse(buf, len - 1, &cwd, argv, &argc, env, &envc), -EPROTO);
	/* A byte left over. */
	buf[len] = 'x';
	assert_int_equal(al_guest_exec_parse(buf, len + 1, &cwd, argv, &argc, env, &envc), -EPROTO);
	/* Counts that do not match the strings: one more env, one fewer. */
	al_guest_put32(buf + 4, 2);
	assert_int_equal(al_guest_exec_parse(buf, len, &cwd, argv, &argc, env, &envc), -EPROTO);
	al_guest_put32(buf + 4, 0);
	assert_int_equal(al_guest_exec_parse(buf, len, &cwd, argv, &argc, env, &envc), -EPROTO);
	/* No program, no counts, counts over the bound. */
	len = exec_payload(buf, 0, 0, s, 1);
	assert_int_equal(al_guest_exec_parse(buf, len, &cwd, argv, &argc, env, &envc), -EPROTO);
	assert_int_equal(al_guest_exec_parse(buf, 7, &cwd, argv, &argc, env, &envc), -EPROTO);
	al_guest_put32(buf, AL_GUEST_MAX_ARGS + 1);
	assert_int_equal(al_guest_exec_parse(buf, len, &cwd, argv, &argc, env, &envc), -EPROTO);
	al_guest_put32(buf, AL_GUEST_MAX_ARGS);
	al_guest_put32(buf + 4, 1);
	assert_int_equal(al_guest_exec_parse(buf, len, &cwd, argv, &argc, env, &envc), -EPROTO);
	al_guest_put32(buf, 0xffffffffu);
	al_guest_put32(buf + 4, 2);
	assert_int_equal(al_guest_exec_parse(buf, len, &cwd, argv, &argc, env, &envc), -EPROTO);
	/* Exactly AL_GUEST_MAX_ARGS empty strings pass (argv 1, env the rest). */
	al_guest_put32(buf, 1);
	al_guest_put32(buf + 4, AL_GUEST_MAX_ARGS - 1);
	buf[8] = 0; /* cwd "" */
	memset(buf + 9, 0, AL_GUEST_MAX_ARGS);
	assert_int_equal(
	    al_guest_exec_parse(buf, 9 + AL_GUEST_MAX_ARGS, &cwd, argv, &argc, env, &envc), 0);
	assert_int_equal(envc, AL_GUEST_MAX_ARGS - 1);
	assert_null(env[AL_GUEST_MAX_ARGS - 1]);
}

/* An EXEC's trailers: LIMITS' then TTY's at the payload's end, taken off
 * with their flags only, never missing, short, zero or out of range. */
static void test_exec_trailers(void **state)
{
	(void)state;
	uint8_t p[32] = {0};
	uint32_t len = 24;
	struct al_guest_exec_opts o = {.memory = 1};

	al_guest_put64(p + 16, 64u << 20);
	assert_int_equal(al_guest_exec_trailers(p, &len, 0, &o), 0);
	assert_int_equal(len, 24);
	assert_int_equal(o.memory, 0);
	assert_false(o.tty);
	assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_FILE_OP, &o), 0);
	assert_int_equal(len, 24);
	assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_LIMITS, &o), 0);
	assert_int_equal(len, 16);
	assert_int_equal(o.memory, 64u << 20);
	len = 7;
	assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_LIMITS, &o), -EPROTO);
	len = 16; /* its last 8 bytes are zero */
	assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_LIMITS, &o), -EPROTO);
	/* Unknown bits, and a file operation with another flag. */
	len = 24;
	assert_int_equal(al_guest_exec_trailers(p, &len, 3, &o), -EPROTO);
	assert_int_equal(al_guest_exec_trailers(p, &len, 5, &o), -EPROTO);
	assert_int_equal(al_guest_exec_trailers(p, &len, 8, &o), -EPROTO);
	assert_int_equal(al_guest_exec_trailers(p, &len, 0x80 | AL_GUEST_EXEC_TTY, &o), -EPROTO);

	/* TTY alone: u16 rows, u16 cols, u32 0 at the end. */
	al_guest_put16(p + 24, 40);
	al_guest_put16(p + 26, 132);
	len = 32;
	assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_TTY, &o), 0);
	assert_int_equal(len, 24);
	assert_true(o.tty);
	assert_int_equal(o.rows, 40);
	assert_int_equal(o.cols, 132);
	assert_int_equal(o.memory, 0);
	/* Both: LIMITS' trailer before TTY's. */
	len = 32;
	assert_int_equal(
	    al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_LIMITS | AL_GUEST_EXEC_TTY, &o), 0);
	assert_int_equal(len, 16);
	assert_int_equal(o.memory, 64u << 20);
	assert_int_equal(o.rows, 40);
	/* Both, with room for one trailer only. */
	len = 8;
	al_guest_put16(p, 40), al_guest_put16(p + 2, 132);
	assert_int_equal(
	    al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_LIMITS | AL_GUEST_EXEC_TTY, &o), -EPROTO);
	len = 7;
	assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_TTY, &o), -EPROTO);
	/* Sizes: 0 and past AL_GUEST_TTY_MAX refused, the bounds taken. */
	static const uint16_t sizes[][3] = {{0, 80, 0},	    {24, 0, 0},	    {1001, 80, 0},
					    {24, 1001, 0},  {65535, 80, 0}, {1, 1, 1},
					    {1000, 1000, 1}};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(*sizes); i++) {
		al_guest_put16(p + 24, sizes[i][0]);
		al_guest_put16(p + 26, sizes[i][1]);
		len = 32;
		assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_TTY, &o),
				 sizes[i][2] ? 0 : -EPROTO);
	}
	/* Its last u32 must be 0. */
	al_guest_put16(p + 24, 24), al_guest_put16(p + 26, 80);
	p[31] = 1;
	len = 32;
	assert_int_equal(al_guest_exec_trailers(p, &len, AL_GUEST_EXEC_TTY, &o), -EPROTO);
}

/* WINSIZE: 4 bytes, each size 1 to AL_GUEST_TTY_MAX; its header takes no
 * flags and no more than 4 bytes. */
static void test_winsize(void **state)
{
	(void)state;
	uint8_t p[4];
	uint16_t r = 0, c = 0;

	al_guest_put16(p, 50), al_guest_put16(p + 2, 200);
	assert_int_equal(al_guest_winsize_get(p, 4, &r, &c), 0);
	assert_int_equal(r, 50);
	assert_int_equal(c, 200);
	assert_int_equal(al_guest_winsize_get(p, 3, &r, &c), -EPROTO);
	al_guest_put16(p, 0);
	assert_int_equal(al_guest_winsize_get(p, 4, &r, &c), -EPROTO);
	al_guest_put16(p, 24), al_guest_put16(p + 2, 1001);
	assert_int_equal(al_guest_winsize_get(p, 4, &r, &c), -EPROTO);
	assert_int_equal(al_guest_max_len(AL_G_WINSIZE), 4);
	assert_int_equal(hdr(AL_G_WINSIZE, 0, 4), 0);
	assert_int_equal(hdr(AL_G_WINSIZE, 0, 5), -EPROTO);
	assert_int_equal(hdr(AL_G_WINSIZE, AL_GUEST_EXEC_TTY, 4), -EPROTO);
}

static void test_exit(void **state)
{
	(void)state;
	struct al_guest_exit e = {.status = 9,
				  .oom = 1,
				  .user_us = 1ull << 40,
				  .system_us = 3,
				  .memory_peak = 0xfedcba9876543210ull},
			     g;
	uint8_t b[AL_GUEST_EXIT_LEN];
	al_guest_exit_put(b, &e);
	assert_int_equal(al_guest_exit_get(b, sizeof(b), &g), 0);
	assert_int_equal(g.status, 9);
	assert_int_equal(g.oom, 1);
	assert_true(g.user_us == 1ull << 40);
	assert_true(g.system_us == 3);
	assert_true(g.memory_peak == 0xfedcba9876543210ull);
	assert_int_equal(al_guest_exit_get(b, sizeof(b) - 1, &g), -EPROTO);
	b[6] = 1; /* pad */
	assert_int_equal(al_guest_exit_get(b, sizeof(b), &g), -EPROTO);
	b[6] = 0;
	b[5] = 1; /* pids: a boolean */
	assert_int_equal(al_guest_exit_get(b, sizeof(b), &g), 0);
	assert_int_equal(g.pids, 1);
	b[5] = 2;
	assert_int_equal(al_guest_exit_get(b, sizeof(b), &g), -EPROTO);
	b[5] = 0;
	b[4] = 2; /* oom is a boolean */
	assert_int_equal(al_guest_exit_get(b, sizeof(b), &g), -EPROTO);
}

#define OK(s)  assert_int_equal(al_guest_path_ok(s, strlen(s)), 0)
#define BAD(s) assert_int_equal(al_guest_path_ok(s, strlen(s)), -EPROTO)

static void test_path(void **state)
{
	(void)state;
	OK("a");
	OK("a/b.c/..d/...");
	OK(".hidden");
	BAD("");
	BAD("/etc/passwd");
	BAD("..");
	BAD("a/../b");
	BAD("a/..");
	BAD("./a");
	BAD("a/./b");
	BAD("a//b");
	BAD("a/");
	/* A NUL before the end. */
	assert_int_equal(al_guest_path_ok("a\0b", 3), -EPROTO);
	/* Too long. */
	char *longp = malloc(5000);
	memset(longp, 'a', 5000);
	assert_int_equal(al_guest_path_ok(longp, 5000), -EPROTO);
	assert_int_equal(al_guest_path_ok(longp, 4095), 0);
	free(longp);
}

static void test_config(void **state)
{
	(void)state;
	const char *mods[] = {"/airlock/modules/virtio.ko", "/airlock/modules/virtio_blk.ko"};
	struct al_guest_input ins[] = {{"/airlock/in/0", "/input", true},
				       {"/airlock/in/1", "/data/x.csv", false}};
	uint16_t pp[] = {3128, 1080}, cp[] = {80, 443};
	struct al_guest_config c = {.modules = mods,
				    .n_modules = 2,
				    .root_device = "/dev/vda",
				    .root_fstype = "ext4",
				    .channel = "/dev/hvc0",
				    .scratch_bytes = 64ull << 20,
				    .inputs = ins,
				    .n_inputs = 2,
				    .hostname = "airlock",
				    .uid = 1000,
				    .gid = 1001,
				    .memory_bytes = 1 << 27,
				    .pids = 64,
				    .network = true,
				    .proxy_ports = pp,
				    .n_proxy_ports = 2,
				    .capture_ports = cp,
				    .n_capture_ports = 2};
	size_t len;
	char *text = al_guest_config_format(&c, &len);
	assert_non_null(text);
	assert_int_equal(strlen(text), len);
	struct al_guest_config_parsed p;
	char err[256] = "";
	assert_int_equal(al_guest_config_parse(text, len, &p, err, sizeof(err)), 0);
	assert_int_equal(p.c.n_modules, 2);
	assert_string_equal(p.c.modules[1], mods[1]);
	assert_string_equal(p.c.root_device, "/dev/vda");
	assert_string_equal(p.c.root_fstype, "ext4");
	assert_string_equal(p.c.channel, "/dev/hvc0");
	assert_true(p.c.scratch_bytes == 64ull << 20);
	assert_int_equal(p.c.n_inputs, 2);
	assert_string_equal(p.c.inputs[1].target, "/data/x.csv");
	assert_true(p.c.inputs[0].dir);
	assert_false(p.c.inputs[1].dir);
	assert_string_equal(p.c.hostname, "airlock");
	assert_int_equal(p.c.uid, 1000);
	assert_int_equal(p.c.gid, 1001);
	assert_true(p.c.memory_bytes == 1 << 27);
	assert_true(p.c.pids == 64);
	assert_true(p.c.network);
	assert_int_equal(p.c.n_proxy_ports, 2);
	assert_int_equal(p.c.proxy_ports[1], 1080);
	assert_int_equal(p.c.capture_ports[1], 443);
	free(text);

	/* Values with a tab or a newline are refused. */
	c.hostname = "a\tb";
	errno = 0;
	assert_null(al_guest_config_format(&c, &len));
	assert_int_equal(errno, EINVAL);
	c.hostname = "airlock";
	ins[0].target = "/in\nput";
	assert_null(al_guest_config_format(&c, &len));
	ins[0].target = "/input";
	c.root_device = NULL;
	assert_null(al_guest_config_format(&c, &len));
}

/* A container's root: its records written and read back. */
static void test_config_container(void **state)
{
	(void)state;
	struct al_guest_mount ms[] = {{AL_GM_BIND, "/etc/resolv.conf", "/airlock/in/0"},
				      {AL_GM_COPY, "/etc/hosts", "/airlock/in/1"},
				      {AL_GM_TMPFS, "/tmp", NULL},
				      {AL_GM_SPECIAL, "/sys", "sysfs"},
				      {AL_GM_MASK, "/proc/kcore", NULL},
				      {AL_GM_RDONLY, "/proc/sys", NULL}};
	gid_t groups[] = {10, 20};
	struct al_guest_config c = {.root_device = "/dev/vda",
				    .root_fstype = "ext4",
				    .channel = "/dev/vport0p1",
				    .scratch_bytes = 1 << 20,
				    .uid = 0,
				    .gid = 0,
				    .container = true,
				    .container_ro = true,
				    .mounts = ms,
				    .n_mounts = 6,
				    .groups = groups,
				    .n_groups = 2,
				    .umask = 027,
				    .seccomp = "/airlock/seccomp",
				    .nofile = 1024,
				    .nofile_soft = 512};
	size_t len;
	char *text = al_guest_config_format(&c, &len);
	assert_non_null(text);
	assert_contains(text, "container\tro\n");
	assert_contains(text, "mount\tcopy\t/etc/hosts\t/airlock/in/1\n");
	assert_contains(text, "mount\ttmpfs\t/tmp\n");
	assert_contains(text, "umask\t27\n");
	assert_contains(text, "nofile\t512\t1024\n");
	struct al_guest_config_parsed p;
	char err[256] = "";
	assert_int_equal(al_guest_config_parse(text, len, &p, err, sizeof(err)), 0);
	assert_true(p.c.container && p.c.container_ro);
	assert_int_equal(p.c.n_mounts, 6);
	for (size_t i = 0; i < 6; i++) {
		assert_int_equal(p.c.mounts[i].kind, ms[i].kind);
		assert_string_equal(p.c.mounts[i].target, ms[i].target);
		if (ms[i].source)
			assert_string_equal(p.c.mounts[i].source, ms[i].source);
		else
			assert_null(p.c.mounts[i].source);
	}
	assert_int_equal(p.c.n_groups, 2);
	assert_int_equal(p.c.groups[1], 20);
	assert_int_equal(p.c.umask, 027);
	assert_string_equal(p.c.seccomp, "/airlock/seccomp");
	assert_true(p.c.nofile == 1024 && p.c.nofile_soft == 512);
	free(text);
	/* Without a container, none of them is written, and the default umask. */
	c.container = false;
	text = al_guest_config_format(&c, &len);
	assert_non_null(text);
	assert_null(strstr(text, "mount"));
	assert_null(strstr(text, "seccomp"));
	assert_int_equal(al_guest_config_parse(text, len, &p, err, sizeof(err)), 0);
	assert_false(p.c.container);
	assert_int_equal(p.c.umask, 022);
	free(text);
	/* A mount whose source does not fit its kind is not written. */
	c.container = true;
	ms[2].source = "/x";
	assert_null(al_guest_config_format(&c, &len));
}

/* The parser's refusals: each names the line and what is wrong. */
static void refuse(const char *text, const char *why)
{
	char *t = strdup(text), err[256] = "";
	struct al_guest_config_parsed p;
	assert_int_equal(al_guest_config_parse(t, strlen(t), &p, err, sizeof(err)), -EINVAL);
	assert_contains(err, why);
	free(t);
}

#define BASE "root\t/dev/vda\text4\nchannel\t/dev/hvc0\nscratch\t100\nids\t1\t2\n"

static void test_config_refusals(void **state)
{
	(void)state;
	char *t = strdup(BASE);
	struct al_guest_config_parsed p;
	char err[256];
	assert_int_equal(al_guest_config_parse(t, strlen(t), &p, err, sizeof(err)), 0);
	free(t);
	refuse(BASE "bogus\t1\n", "line 5: unknown record \"bogus\"");
	refuse(BASE "scratch\t5\n", "line 5: \"scratch\" appears twice");
	refuse(BASE "pids\t-1\n", "\"-1\" is not a number");
	refuse(BASE "pids\t12x\n", "out of range");
	refuse(BASE "proxy_port\t65536\n", "out of range");
	refuse(BASE "input\t/a\tb\tdir\n", "\"b\" is not an absolute path");
	refuse(BASE "input\t/a\t/b\tfifo\n", "neither dir nor file");
	refuse(BASE "network\tyes\n", "neither 0 nor 1");
	refuse(BASE "module\n", "wrong number of fields");
	refuse(BASE "module\t/a\t/b\n", "wrong number of fields");
	refuse(BASE "hostname\t\n", "an empty field");
	refuse(BASE "pids\t1", "no newline");
	refuse("root\t/dev/vda\text4\nscratch\t100\nids\t1\t2\n", "lacks");
	refuse(BASE "mount\tbogus\t/x\n", "mount kind \"bogus\" is unknown");
	refuse(BASE "container\trw\nmount\tbind\t/x\n", "wrong number of fields");
	refuse(BASE "container\trw\nmount\ttmpfs\t/x\t/y\n", "wrong number of fields");
	refuse(BASE "container\trw\nmount\tbind\t/x\ty\n", "\"y\" is not an absolute path");
	refuse(BASE "container\trw\nmount\tspecial\t/x\tproc\n", "not one a container gets");
	refuse(BASE "container\tyes\n", "neither rw nor ro");
	refuse(BASE "container\trw\numask\t8\n", "not an octal mode");
	refuse(BASE "container\trw\numask\t1777\n", "not an octal mode");
	refuse(BASE "container\trw\nnofile\t10\t5\n", "soft not within 1 to hard");
	refuse(BASE "container\trw\nnofile\t0\t5\n", "soft not within 1 to hard");
	refuse(BASE "container\trw\ngroup\t-1\n", "not a number");
	refuse(BASE "mount\ttmpfs\t/x\n", "without container");
	refuse(BASE "group\t5\n", "without container");
	refuse(BASE "umask\t22\n", "without container");
	char nul[] = BASE "pids\t1\0\n";
	t = malloc(sizeof(nul));
	memcpy(t, nul, sizeof(nul));
	assert_int_equal(al_guest_config_parse(t, sizeof(nul) - 1, &p, err, sizeof(err)), -EINVAL);
	assert_contains(err, "NUL");
	free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_header_bounds),
	    cmocka_unit_test(test_exec_parse),
	    cmocka_unit_test(test_exec_trailers),
	    cmocka_unit_test(test_winsize),
	    cmocka_unit_test(test_exit),
	    cmocka_unit_test(test_path),
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_config_refusals),
	    cmocka_unit_test(test_config_container),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
