// SPDX-License-Identifier: GPL-2.0
/*
 * Random mutations of a connection's captured datagrams, sent as fast as the
 * sockets take them (selftests/hostile_packets.sh, issue 35).
 *
 *   mutate HOST DST_CONN SRC_CONN COUNT SECONDS POOL
 *
 * POOL holds the connection's real UDP payloads, each as a 2-byte big-endian
 * length and its bytes (hostile_packets.py capture). Each datagram sent is one of
 * them with 1 to 5 mutations: a bit flipped, a byte or an aligned word set to a
 * boundary value, the end cut off, random bytes appended, the tail of another
 * packet spliced on, a word after the common header set to a boundary value.
 * Most keep the spec's version and carry DST_CONN and SRC_CONN (a packet of the
 * peer), so that they reach the connection's own parsing. Stops after COUNT
 * datagrams or SECONDS, whichever comes first, and prints
 * "sent N mutated datagrams in S s (R/s)". Seeded by the connection ids:
 * the same ids send the same datagrams.
 *
 * C, not Python: under the test VM's emulated CPUs Python mutates about 300
 * datagrams a second, too few for 10^6 in a CI run.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MR_PORT 4793
#define MR_VERSION 0xd0
#define COMMON_HEADER 16
#define MAX_POOL 1024
#define MAX_DATAGRAM 9216
#define BUF_SIZE (MAX_DATAGRAM + 5 * 64)
#define SOCKETS 8
#define BATCH 32

struct datagram {
	size_t len;
	uint8_t *bytes;
};

static struct datagram pool[MAX_POOL];
static size_t pool_len;

/* xorshift64*: small, fast, and the same stream on every machine. */
static uint64_t rng_state;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dULL;
}

/* A number in [0, n), n > 0. */
static size_t rng_below(size_t n)
{
	return (size_t)((rng_next() >> 11) % n);
}

static const uint32_t boundary32[] = {
	0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff,
	0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff,
};
#define N_BOUNDARY (sizeof(boundary32) / sizeof(boundary32[0]))

static void put_be32(uint8_t *p, uint32_t v, size_t room)
{
	uint8_t be[4] = { v >> 24, v >> 16, v >> 8, v };

	memcpy(p, be, room < 4 ? room : 4);
}

static int read_pool(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t hdr[2];

	if (!f) {
		perror(path);
		return -1;
	}
	while (pool_len < MAX_POOL && fread(hdr, 1, 2, f) == 2) {
		size_t len = (size_t)hdr[0] << 8 | hdr[1];
		uint8_t *b;

		if (len < COMMON_HEADER || len > MAX_DATAGRAM)
			break;
		b = malloc(len);
		if (!b || fread(b, 1, len, f) != len) {
			free(b);
			break;
		}
		pool[pool_len++] = (struct datagram){ .len = len, .bytes = b };
	}
	fclose(f);
	return pool_len ? 0 : -1;
}

/* One mutated datagram into buf (BUF_SIZE bytes); returns its length. */
static size_t mutate(uint8_t *buf, const uint8_t ids[8])
{
	static const unsigned int op_counts[] = { 1, 1, 1, 2, 3, 5 };
	static const uint8_t byte_values[] = { 0, 1, 0x7f, 0x80, 0xff };
	const struct datagram *d = &pool[rng_below(pool_len)];
	unsigned int ops = op_counts[rng_below(6)];
	size_t len = d->len, i;

	memcpy(buf, d->bytes, len);
	if (rng_below(100) < 85)
		memcpy(buf + 4, ids, 8);
	while (ops--) {
		switch (rng_below(7)) {
		case 0:
			if (len) {
				i = rng_below(len * 8);
				buf[i / 8] ^= 1 << (i % 8);
			}
			break;
		case 1:
			if (len) {
				i = rng_below(sizeof(byte_values) + 1);
				buf[rng_below(len)] = i < sizeof(byte_values) ?
					byte_values[i] : (uint8_t)rng_next();
			}
			break;
		case 2:
			if (len >= 4) {
				i = rng_below(N_BOUNDARY + 1);
				put_be32(buf + (rng_below(len - 3) & ~(size_t)3),
					 i < N_BOUNDARY ? boundary32[i] : (uint32_t)rng_next(), 4);
			}
			break;
		case 3:
			len = rng_below(len + 1);
			break;
		case 4:
			for (i = 1 + rng_below(63); i && len < BUF_SIZE; i--)
				buf[len++] = (uint8_t)rng_next();
			break;
		case 5: {
			const struct datagram *q = &pool[rng_below(pool_len)];
			size_t cut = rng_below((len < q->len ? len : q->len) + 1);

			memcpy(buf + cut, q->bytes + cut, q->len - cut);
			len = q->len;
			break;
		}
		case 6:
			if (len > COMMON_HEADER) {
				i = COMMON_HEADER + (rng_below(len - COMMON_HEADER) & ~(size_t)3);
				put_be32(buf + i, boundary32[rng_below(N_BOUNDARY)], len - i);
			}
			break;
		}
	}
	if (rng_below(2) && len >= 2)
		buf[0] = MR_VERSION;
	return len;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static uint8_t bufs[BATCH][BUF_SIZE];
	struct sockaddr_storage to = { 0 };
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	unsigned long long count, sent = 0, refused = 0;
	int socks[SOCKETS], family, n;
	uint32_t dst, src;
	uint8_t ids[8];
	double seconds, start, took;
	socklen_t to_len;

	if (argc != 7) {
		fprintf(stderr, "usage: %s HOST DST_CONN SRC_CONN COUNT SECONDS POOL\n", argv[0]);
		return 2;
	}
	dst = strtoul(argv[2], NULL, 0);
	src = strtoul(argv[3], NULL, 0);
	count = strtoull(argv[4], NULL, 0);
	seconds = strtod(argv[5], NULL);
	if (read_pool(argv[6])) {
		fprintf(stderr, "%s: no datagram in the pool\n", argv[6]);
		return 1;
	}
	if (inet_pton(AF_INET6, argv[1], &((struct sockaddr_in6 *)&to)->sin6_addr) == 1) {
		family = AF_INET6;
		((struct sockaddr_in6 *)&to)->sin6_port = htons(MR_PORT);
		to_len = sizeof(struct sockaddr_in6);
	} else if (inet_pton(AF_INET, argv[1], &((struct sockaddr_in *)&to)->sin_addr) == 1) {
		family = AF_INET;
		((struct sockaddr_in *)&to)->sin_port = htons(MR_PORT);
		to_len = sizeof(struct sockaddr_in);
	} else {
		fprintf(stderr, "%s: not an address\n", argv[1]);
		return 2;
	}
	to.ss_family = family;
	for (n = 0; n < SOCKETS; n++) {
		/* Unbound: each socket gets its own ephemeral source port. */
		socks[n] = socket(family, SOCK_DGRAM, 0);
		if (socks[n] < 0) {
			perror("socket");
			return 1;
		}
	}
	put_be32(ids, dst, 4);
	put_be32(ids + 4, src, 4);
	rng_state = ((uint64_t)dst << 32 | src) ^ 0x9e3779b97f4a7c15ULL;
	if (!rng_state)
		rng_state = 1;

	start = now_s();
	while (sent + refused < count && now_s() - start < seconds) {
		unsigned long long left = count - sent - refused;
		int batch = left < BATCH ? (int)left : BATCH, r;

		memset(msgs, 0, sizeof(msgs));
		for (n = 0; n < batch; n++) {
			iov[n].iov_base = bufs[n];
			iov[n].iov_len = mutate(bufs[n], ids);
			msgs[n].msg_hdr.msg_name = &to;
			msgs[n].msg_hdr.msg_namelen = to_len;
			msgs[n].msg_hdr.msg_iov = &iov[n];
			msgs[n].msg_hdr.msg_iovlen = 1;
		}
		/* A full device queue or an ICMP error costs the batch, not the run. */
		r = sendmmsg(socks[(sent + refused) / BATCH % SOCKETS], msgs, batch, 0);
		if (r < 0) {
			if (errno != ENOBUFS && errno != ECONNREFUSED && errno != EAGAIN) {
				perror("sendmmsg");
				return 1;
			}
			r = 0;
		}
		sent += r;
		refused += batch - r;
	}
	took = now_s() - start;
	printf("sent %llu mutated datagrams in %.0f s (%.0f/s; %llu refused by the socket)\n",
	       sent, took, sent / (took > 1e-3 ? took : 1e-3), refused);
	return 0;
}
