/*
 * tests/daemon/chat_render.c — core/text/chat.c against what transformers'
 * apply_chat_template renders for the fixtures
 * (tests/fixtures/tokenizer/chat_cases.jsonl: messages, add_generation_prompt,
 * text, ids): the family detected from each converted model, the text, and
 * the ids of that text through the model's tokenizer. Then the cases with no
 * reference: the PLAIN fallback, a system message under [INST], a bad role.
 * Last, GLM-4.5's, MiniMax-M2's, DeepSeek-V3.1's, Kimi-K2's and gpt-oss's
 * (harmony, its date fixed as the cases fix strftime_now) formats
 * against jinja2's renderings of their templates (the _cases.jsonl files of
 * tests/fixtures/chat/, tools/ref/chat_jinja_cases.py), with the thinking switch
 * left out and off (DeepSeek-V3.1: also on); text only, as the fixture
 * tokenizer lacks their special tokens. Each family is detected from the
 * template text: olmoe's checkpoint with the model's template as its
 * chat_template.jinja.
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fixture_util.h"

static int fails;

#define CHECK(c, ...)                                                                              \
	do {                                                                                       \
		if (!(c)) {                                                                        \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			fails++;                                                                   \
		}                                                                                  \
	} while (0)

static void one_case(json_t *c, const char *dir)
{
	const char *fx = json_string_value(json_object_get(c, "fixture"));
	json_t *msgs = json_object_get(c, "messages"), *m, *ids = json_object_get(c, "ids");
	int gen = json_is_true(json_object_get(c, "add_generation_prompt"));
	struct coli_chat_msg cm[16];
	struct coli_chat_template t;
	coli_engine_t *e;
	char path[4096], err[512], *text;
	size_t len, i;
	int *got, n;

	if (fx_convert(fx, COLI_DTYPE_BF16, dir, path, sizeof(path)) ||
	    coli_engine_open(path, NULL, &e, err, sizeof(err))) {
		CHECK(0, "%s: cannot convert or open", fx);
		return;
	}
	coli_chat_template_init(e, &t);
	CHECK(t.from_template, "%s: family not from the template", fx);
	CHECK(t.family == (strcmp(fx, "mixtral") ? COLI_CHAT_CHATML : COLI_CHAT_INST),
	      "%s: family %s", fx, coli_chat_family_name(t.family));
	json_array_foreach(msgs, i, m)
	{
		cm[i].role = json_string_value(json_object_get(m, "role"));
		cm[i].content = json_string_value(json_object_get(m, "content"));
	}
	CHECK(coli_chat_render(&t, cm, (int)json_array_size(msgs), gen, &text, &len) == 0,
	      "%s: render failed", fx);
	CHECK(text && !strcmp(text, json_string_value(json_object_get(c, "text"))),
	      "%s gen=%d: rendered\n%s\nwant\n%s", fx, gen, text,
	      json_string_value(json_object_get(c, "text")));
	if (text && !coli_tokenizer_encode(coli_engine_tokenizer(e), text, len, &got, &n, err,
	                                   sizeof(err))) {
		int same = n == (int)json_array_size(ids);

		for (int k = 0; same && k < n; k++)
			same = got[k] == (int)json_integer_value(json_array_get(ids, (size_t)k));
		CHECK(same, "%s gen=%d: ids of the rendered text differ from transformers'", fx,
		      gen);
		free(got);
	}
	printf("ok  %-10s gen=%d family=%s eot=%d bytes=%zu\n", fx, gen,
	       coli_chat_family_name(t.family), t.eot_id, len);
	free(text);
	coli_chat_template_free(&t);
	coli_engine_close(e);
}

static void no_reference_cases(void)
{
	struct coli_chat_template t = {.family = COLI_CHAT_PLAIN, .eot_id = -1};
	struct coli_chat_msg m[] = {
	    {"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}, {"user", "Bye"}};
	char *s;
	size_t n;

	CHECK(!coli_chat_render(&t, m, 4, 1, &s, &n), "plain");
	CHECK(!strcmp(s, "System: Be brief.\n\nUser: Hi\nAssistant: Hello.\nUser: Bye\nAssistant:"),
	      "plain: %s", s);
	free(s);
	t.family = COLI_CHAT_INST;
	strcpy(t.bos, "<s>");
	strcpy(t.eos, "</s>");
	CHECK(!coli_chat_render(&t, m, 4, 1, &s, &n), "inst");
	CHECK(!strcmp(s, "<s>[INST] Be brief.\n\nHi [/INST]Hello.</s>[INST] Bye [/INST]"),
	      "inst with system: %s", s);
	free(s);
	m[1].role = "tool";
	CHECK(coli_chat_render(&t, m, 4, 1, &s, &n) == -EINVAL, "bad role accepted");
	CHECK(!coli_chat_render(&t, m, 0, 1, &s, &n) && n == strlen(t.bos), "empty");
	free(s);
	/* developer is harmony's role only; harmony refuses a channel header in
	 * an assistant text, as its template raises */
	m[1].role = "developer";
	CHECK(coli_chat_render(&t, m, 4, 1, &s, &n) == -EINVAL, "developer outside harmony");
	t.family = COLI_CHAT_HARMONY;
	CHECK(!coli_chat_render(&t, m, 4, 1, &s, &n), "harmony developer");
	free(s);
	m[1].role = "user";
	m[2].content = "x<|channel|>final<|message|>y";
	CHECK(coli_chat_render(&t, m, 4, 1, &s, &n) == -EINVAL, "harmony channel in content");
	printf("ok  plain fallback, [INST] system message, bad role, harmony's roles\n");
}

/* One jinja2 rendering of a family's template (fam) against coli's. */
static void jinja_case(json_t *c, enum coli_chat_family fam)
{
	json_t *msgs = json_object_get(c, "messages"), *m, *think;
	const char *want = json_string_value(json_object_get(c, "text")),
	           *name = coli_chat_family_name(fam);
	struct coli_chat_template t = {.family = fam, .eot_id = -1};
	struct coli_chat_msg cm[16];
	int gen = json_is_true(json_object_get(c, "add_generation_prompt"));
	char *text = NULL;
	size_t len = 0, i;

	think = json_object_get(c, "enable_thinking");
	t.no_think = json_is_false(think);
	t.think_on = json_is_true(think);
	strcpy(t.date, "2026-01-02"); /* harmony: tools/ref/chat_jinja_cases.py's HARMONY_DATE */
	if (json_array_size(msgs) > 16) {
		CHECK(0, "%s: a case with more than 16 messages", name);
		return;
	}
	json_array_foreach(msgs, i, m)
	{
		cm[i].role = json_string_value(json_object_get(m, "role"));
		cm[i].content = json_string_value(json_object_get(m, "content"));
	}
	CHECK(coli_chat_render(&t, cm, (int)json_array_size(msgs), gen, &text, &len) == 0,
	      "%s: render failed", name);
	CHECK(text && want && len == strlen(want) && !memcmp(text, want, len),
	      "%s gen=%d no_think=%d: rendered\n%s\nwant\n%s", name, gen, t.no_think, text, want);
	free(text);
}

/* olmoe's checkpoint with the template chat/tpl: detected as fam, its
 * end-of-turn id that of the token eot in olmoe's tokenizer (-1 if absent). */
static void detect(const char *dir, const char *tpl, enum coli_chat_family fam, const char *eot)
{
	const char *name = coli_chat_family_name(fam);
	static const char *files[] = {"config.json", "generation_config.json", "model.safetensors",
	                              "tokenizer.json", "tokenizer_config.json"};
	struct coli_convert_opts o;
	struct coli_chat_template t;
	coli_engine_t *e = NULL;
	char src[2048], out[2048], a[PATH_MAX + 64], b[4096], err[512], root[PATH_MAX];

	/* the links must hold absolute paths: fx_root() may be relative */
	if (!realpath(fx_root(), root)) {
		CHECK(0, "%s: cannot resolve %s", name, fx_root());
		return;
	}
	snprintf(src, sizeof(src), "%s/%s_src", dir, name);
	snprintf(out, sizeof(out), "%s/%s.coli", dir, name);
	CHECK(!mkdir(src, 0755) || errno == EEXIST, "mkdir %s", src);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(a, sizeof(a), "%s/olmoe/%s", root, files[i]);
		snprintf(b, sizeof(b), "%s/%s", src, files[i]);
		CHECK(!symlink(a, b) || errno == EEXIST, "symlink %s", b);
	}
	snprintf(a, sizeof(a), "%s/chat/%s", root, tpl);
	snprintf(b, sizeof(b), "%s/chat_template.jinja", src);
	CHECK(!symlink(a, b) || errno == EEXIST, "symlink %s", b);
	coli_convert_opts_init(&o);
	o.hf_dir = src;
	o.out_path = out;
	o.quant = COLI_DTYPE_BF16;
	if (coli_convert(&o, err, sizeof(err)) ||
	    coli_engine_open(out, NULL, &e, err, sizeof(err))) {
		CHECK(0, "%s: olmoe with the template %s: %s", name, tpl, err);
		return;
	}
	coli_chat_template_init(e, &t);
	CHECK(t.family == fam && t.from_template, "%s: detected %s (from template %d)", name,
	      coli_chat_family_name(t.family), t.from_template);
	CHECK(t.eot_id == coli_tokenizer_token_id(coli_engine_tokenizer(e), eot),
	      "%s: eot %d, want the id of %s in olmoe's tokenizer", name, t.eot_id, eot);
	CHECK(!t.no_think, "%s: thinking off by default", name);
	printf("ok  %s: detected from the template text, family=%s\n", name,
	       coli_chat_family_name(t.family));
	coli_chat_template_free(&t);
	coli_engine_close(e);
}

/* Every line of chat/file (at least min) through jinja_case. */
static void jinja_cases(const char *file, enum coli_chat_family fam, int min)
{
	char p[4096], line[65536];
	int n = 0;
	FILE *f;

	snprintf(p, sizeof(p), "%s/chat/%s", fx_root(), file);
	f = fopen(p, "r");
	CHECK(f, "cannot open %s", p);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		json_t *c = json_loads(line, 0, NULL);

		CHECK(c, "%s: line %d is not JSON", p, n + 1);
		if (c)
			jinja_case(c, fam);
		json_decref(c);
		n++;
	}
	fclose(f);
	CHECK(n >= min, "%s: %d cases, want %d or more", p, n, min);
	printf("ok  %s: %d jinja2 renderings of %s\n", coli_chat_family_name(fam), n, file);
}

int main(void)
{
	const char *tmp = getenv("TEST_TMP");
	char p[4096], line[65536];
	FILE *f;

	snprintf(p, sizeof(p), "%s/tokenizer/chat_cases.jsonl", fx_root());
	f = fopen(p, "r");
	if (!f) {
		printf("no %s\n", p);
		return 77;
	}
	while (fgets(line, sizeof(line), f)) {
		json_t *c = json_loads(line, 0, NULL);

		if (c)
			one_case(c, tmp ? tmp : ".");
		json_decref(c);
	}
	fclose(f);
	no_reference_cases();
	jinja_cases("glm45_cases.jsonl", COLI_CHAT_GLM, 44);
	jinja_cases("minimax_m2_cases.jsonl", COLI_CHAT_MINIMAX, 72);
	jinja_cases("deepseek_v31_cases.jsonl", COLI_CHAT_DEEPSEEK, 126);
	jinja_cases("kimi_k2_cases.jsonl", COLI_CHAT_KIMI, 72);
	jinja_cases("gpt_oss_cases.jsonl", COLI_CHAT_HARMONY, 44);
	detect(tmp ? tmp : ".", "glm45_chat_template.jinja", COLI_CHAT_GLM, "<|user|>");
	detect(tmp ? tmp : ".", "minimax_m2_chat_template.jinja", COLI_CHAT_MINIMAX, "[e~[");
	detect(tmp ? tmp : ".", "deepseek_v31_chat_template.jinja", COLI_CHAT_DEEPSEEK,
	       "<\xef\xbd\x9c"
	       "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>");
	detect(tmp ? tmp : ".", "kimi_k2_chat_template.jinja", COLI_CHAT_KIMI, "<|im_end|>");
	detect(tmp ? tmp : ".", "gpt_oss_chat_template.jinja", COLI_CHAT_HARMONY, "<|return|>");
	return fails ? 1 : 0;
}
