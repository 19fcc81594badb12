/*
 * tests/cpu/act_quantize.c — coli_act_quantize against the canonical rule of
 * cpu/cpu.h written out plainly here (amax, d = amax / 127, q = roundf(x /
 * d) clamped to +-127, NaN -> 0): q, d and qsum byte for byte. Inputs: every
 * tie k + 0.5 and its float neighbours (blocks whose amax is 127, so the
 * scaled value is x itself), random blocks over many scales, zeros,
 * subnormals, NaN, +-inf and huge values.
 */
#include <math.h>

#include "helpers.h"

static void reference(const float *x, int n, int8_t *q, float *d, int32_t *qsum)
{
	for (int b = 0; b < n / 32; b++) {
		const float *xb = x + b * 32;
		float amax = 0.0f, id;
		int32_t sum = 0;

		for (int j = 0; j < 32; j++)
			amax = fmaxf(amax, fabsf(xb[j]));
		d[b] = amax / 127.0f;
		id = d[b] != 0.0f ? 1.0f / d[b] : 0.0f;
		for (int j = 0; j < 32; j++) {
			float v = roundf(xb[j] * id);
			int qi = v != v ? 0 : v > 127.0f ? 127 : v < -127.0f ? -127 : (int)v;

			q[b * 32 + j] = (int8_t)qi;
			sum += qi;
		}
		qsum[b] = sum;
	}
}

#define N_MAX (1 << 16)

static int check(const char *what, const float *x, int n)
{
	static int8_t q[N_MAX], rq[N_MAX];
	static float d[N_MAX / 32], rd[N_MAX / 32];
	static int32_t s[N_MAX / 32], rs[N_MAX / 32];
	struct coli_act a = {.q = q, .d = d, .qsum = s};

	coli_act_quantize(&a, x, n);
	reference(x, n, rq, rd, rs);
	for (int i = 0; i < n; i++)
		if (q[i] != rq[i]) {
			fprintf(stderr, "%s: element %d (x %a, scaled %a): q %d, want %d\n", what,
			        i, x[i], x[i] * (rd[i / 32] != 0 ? 1.0f / rd[i / 32] : 0.0f), q[i],
			        rq[i]);
			return 1;
		}
	if (memcmp(d, rd, sizeof(float) * (n / 32)) || memcmp(s, rs, 4 * (n / 32))) {
		fprintf(stderr, "%s: block scales or sums differ\n", what);
		return 1;
	}
	return 0;
}

int main(void)
{
	static float x[N_MAX];
	int fails = 0, n = 0, blocks = 0;

	/* ties and their neighbours: 31 values a block beside a 127 (d = 1) */
	for (int k = -128; k <= 127; k++)
		for (int h = 0; h < 2; h++) {
			float c = (float)k + 0.5f * h;

			for (int u = -3; u <= 3; u++) {
				float v = c;

				for (int i = 0; i < u; i++)
					v = nextafterf(v, INFINITY);
				for (int i = 0; i > u; i--)
					v = nextafterf(v, -INFINITY);
				if (fabsf(v) > 127.0f)
					continue;
				if (n % 32 == 0)
					x[n++] = (blocks++ & 1) ? 127.0f : -127.0f;
				x[n++] = v;
				if (n == N_MAX - 32) {
					fails += check("ties", x, n);
					n = 0;
				}
			}
		}
	while (n % 32)
		x[n++] = 0.0f;
	fails += check("ties", x, n);
	/* random blocks over scales 2^-30 .. 2^30 */
	for (int r = 0; r < 64; r++) {
		for (int i = 0; i < N_MAX; i++) {
			double u = (double)(rng_u64() >> 11) / 9007199254740992.0 * 2 - 1;

			x[i] = (float)ldexp(u, (int)(i / 32 % 61) - 30);
		}
		fails += check("random", x, N_MAX);
	}
	/* zeros, subnormals, NaN, inf, huge */
	for (int i = 0; i < 32 * 8; i++)
		x[i] = 0.0f;
	x[33] = 1e-45f, x[34] = -3e-44f, x[35] = 1e-40f;
	x[64] = NAN, x[65] = 1.0f, x[66] = -2.5f;
	x[96] = INFINITY, x[97] = 3.0f;
	x[128] = -INFINITY, x[129] = NAN;
	x[160] = 3e38f, x[161] = -3e38f, x[162] = 1.5f;
	x[192] = 1e-38f, x[193] = -5e-39f;
	fails += check("special", x, 32 * 8);
	printf("coli_act_quantize: %s\n",
	       fails ? "DIFFERS from the rule" : "every case as the rule");
	return fails ? 1 : 0;
}
