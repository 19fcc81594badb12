/*
 * tests/daemon/chat_render.c — core/text/chat.c against what transformers'
 * apply_chat_template renders for the fixtures
 * (tests/fixtures/tokenizer/chat_cases.jsonl: messages, add_generation_prompt,
 * text, ids): the family detected from each converted model, the text, and
 * the ids of that text through the model's tokenizer. Then the cases with no
 * reference: the PLAIN fallback, a system message under [INST], a bad role.
 * Last, GLM-4.5's format against jinja2's renderings of its template
 * (tests/fixtures/chat/glm45_cases.jsonl, tools/glm_chat_cases.py), with the
 * thinking switch left out and off; text only, as the fixture tokenizer lacks
 * GLM's special tokens. The family is detected from the template text: olmoe's
 * checkpoint with GLM-4.5's template as its chat_template.jinja.
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
	printf("ok  plain fallback, [INST] system message, bad role\n");
}

static void glm_case(json_t *c)
{
	json_t *msgs = json_object_get(c, "messages"), *m, *think;
	const char *want = json_string_value(json_object_get(c, "text"));
	struct coli_chat_template t = {.family = COLI_CHAT_GLM, .eot_id = -1};
	struct coli_chat_msg cm[16];
	int gen = json_is_true(json_object_get(c, "add_generation_prompt"));
	char *text = NULL;
	size_t len = 0, i;

	think = json_object_get(c, "enable_thinking");
	t.no_think = json_is_false(think);
	if (json_array_size(msgs) > 16) {
		CHECK(0, "glm: a case with more than 16 messages");
		return;
	}
	json_array_foreach(msgs, i, m)
	{
		cm[i].role = json_string_value(json_object_get(m, "role"));
		cm[i].content = json_string_value(json_object_get(m, "content"));
	}
	CHECK(coli_chat_render(&t, cm, (int)json_array_size(msgs), gen, &text, &len) == 0,
	      "glm: render failed");
	CHECK(text && want && len == strlen(want) && !memcmp(text, want, len),
	      "glm gen=%d no_think=%d: rendered\n%s\nwant\n%s", gen, t.no_think, text, want);
	free(text);
}

static void glm_detect(const char *dir)
{
	static const char *files[] = {"config.json", "generation_config.json", "model.safetensors",
	                              "tokenizer.json", "tokenizer_config.json"};
	struct coli_convert_opts o;
	struct coli_chat_template t;
	coli_engine_t *e = NULL;
	char src[2048], out[2048], a[PATH_MAX + 64], b[4096], err[512], root[PATH_MAX];

	/* the links must hold absolute paths: fx_root() may be relative */
	if (!realpath(fx_root(), root)) {
		CHECK(0, "glm: cannot resolve %s", fx_root());
		return;
	}
	snprintf(src, sizeof(src), "%s/glm_src", dir);
	snprintf(out, sizeof(out), "%s/glm.coli", dir);
	CHECK(!mkdir(src, 0755) || errno == EEXIST, "mkdir %s", src);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(a, sizeof(a), "%s/olmoe/%s", root, files[i]);
		snprintf(b, sizeof(b), "%s/%s", src, files[i]);
		CHECK(!symlink(a, b) || errno == EEXIST, "symlink %s", b);
	}
	snprintf(a, sizeof(a), "%s/chat/glm45_chat_template.jinja", root);
	snprintf(b, sizeof(b), "%s/chat_template.jinja", src);
	CHECK(!symlink(a, b) || errno == EEXIST, "symlink %s", b);
	coli_convert_opts_init(&o);
	o.hf_dir = src;
	o.out_path = out;
	o.quant = COLI_DTYPE_BF16;
	if (coli_convert(&o, err, sizeof(err)) ||
	    coli_engine_open(out, NULL, &e, err, sizeof(err))) {
		CHECK(0, "glm: olmoe with GLM-4.5's template: %s", err);
		return;
	}
	coli_chat_template_init(e, &t);
	CHECK(t.family == COLI_CHAT_GLM && t.from_template, "glm: detected %s (from template %d)",
	      coli_chat_family_name(t.family), t.from_template);
	CHECK(t.eot_id == -1, "glm: eot %d without a <|user|> token", t.eot_id);
	CHECK(!t.no_think, "glm: thinking off by default");
	printf("ok  glm: detected from the template text, family=%s\n",
	       coli_chat_family_name(t.family));
	coli_engine_close(e);
}

static void glm_cases(void)
{
	char p[4096], line[65536];
	int n = 0;
	FILE *f;

	snprintf(p, sizeof(p), "%s/chat/glm45_cases.jsonl", fx_root());
	f = fopen(p, "r");
	CHECK(f, "cannot open %s", p);
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		json_t *c = json_loads(line, 0, NULL);

		CHECK(c, "%s: line %d is not JSON", p, n + 1);
		if (c)
			glm_case(c);
		json_decref(c);
		n++;
	}
	fclose(f);
	CHECK(n >= 40, "%s: %d cases, want 44", p, n);
	printf("ok  glm: %d jinja2 renderings of GLM-4.5's template\n", n);
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
	glm_cases();
	glm_detect(tmp ? tmp : ".");
	return fails ? 1 : 0;
}
