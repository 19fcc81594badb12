/*
 * core/convert/convert_hf.c — reading a Hugging Face checkpoint directory:
 * config.json (parsed by core/convert/convert_hf_config.c), the generation and
 * tokenizer files, and the safetensors shard list. The result is a struct
 * coli_model_config (stored as the container's CONFIG section) plus the text
 * sections kept verbatim.
 *
 * Config dialects: core/convert/convert_hf_config.c.
 *
 * Without tokenizer.json, a tiktoken rank file (Kimi's tiktoken.model) is
 * read as one (core/convert/convert_tiktoken.c).
 * A missing tokenizer.json is not an error: the container is written without
 * a TOKENIZER section (a warning says so) and the engine refuses text
 * commands on it, while --ids paths still work. That keeps weight-only test
 * checkpoints convertible.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/convert/convert_internal.h"

#define TEXT_MAX (256u << 20) /* tokenizer.json of a 150k vocab is ~10 MB */

/* Whole small file into a malloc'd NUL-terminated buffer. -ENOENT if absent. */
static int read_text(const char *path, char **out, size_t *len)
{
	struct stat st;
	ssize_t r;
	size_t got = 0;
	char *buf;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	*out = NULL;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > TEXT_MAX) {
		close(fd);
		return -EFBIG;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	while (got < (size_t)st.st_size) {
		r = read(fd, buf + got, (size_t)st.st_size - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			rc = r < 0 ? -errno : -EIO;
			free(buf);
			close(fd);
			return rc;
		}
		got += (size_t)r;
	}
	close(fd);
	buf[got] = 0;
	*out = buf;
	*len = got;
	return 0;
}

/* Reads DIR/name as a section (verbatim). Absent -> 0 with nothing stored
 * unless required. Returns the parsed JSON in *root when root != NULL. */
static int load_file(struct coli_convert_hf *h, const char *name, enum coli_section sec,
                     int required, json_t **root, char *errbuf, size_t errlen)
{
	char *path = coli_convert_path_join(h->dir, name), *buf = NULL;
	json_error_t jerr;
	size_t len = 0;
	int rc;

	if (root)
		*root = NULL;
	if (!path)
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	rc = read_text(path, &buf, &len);
	if (rc == -ENOENT && !required) {
		free(path);
		return 0;
	}
	if (rc) {
		coli_convert_errf(errbuf, errlen, rc, "%s: cannot read: %s", path, strerror(-rc));
		free(path);
		return rc;
	}
	if (root) {
		*root = json_loadb(buf, len, 0, &jerr);
		/* transformers writes integers past 64 bits (tokenizer_config.json's
		 * "no limit" model_max_length, 1e30): read such a file with every
		 * integer as a double; json_long() takes both */
		if (!*root && json_error_code(&jerr) == json_error_numeric_overflow)
			*root = json_loadb(buf, len, JSON_DECODE_INT_AS_REAL, &jerr);
		if (!*root || !json_is_object(*root)) {
			coli_convert_errf(errbuf, errlen, -EINVAL,
			                  "%s: not a JSON object (line %d: %s)", path, jerr.line,
			                  *root ? "top level is not an object" : jerr.text);
			json_decref(*root);
			*root = NULL;
			free(buf);
			free(path);
			return -EINVAL;
		}
	}
	free(path);
	if (sec) {
		free(h->section[sec]);
		h->section[sec] = buf;
		h->section_bytes[sec] = len;
	} else {
		free(buf);
	}
	return 0;
}

/* tokenizer_config.json's chat_template: a string, or a list of
 * {name, template} from which "default" (else the first) is taken.
 * A chat_template.jinja file, when present, wins (transformers >= 4.43
 * writes the template there). */
static int load_chat_template(struct coli_convert_hf *h, json_t *tokcfg, char *errbuf,
                              size_t errlen)
{
	json_t *t = json_object_get(tokcfg, "chat_template"), *e;
	const char *s = NULL;
	size_t i;
	int rc;

	rc = load_file(h, "chat_template.jinja", COLI_SECTION_CHAT_TEMPLATE, 0, NULL, errbuf,
	               errlen);
	if (rc || h->section[COLI_SECTION_CHAT_TEMPLATE])
		return rc;
	if (json_is_string(t))
		s = json_string_value(t);
	json_array_foreach(t, i, e)
	{
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *tpl = json_string_value(json_object_get(e, "template"));

		if (tpl && (!s || (name && !strcmp(name, "default"))))
			s = tpl;
	}
	if (!s)
		return 0;
	h->section[COLI_SECTION_CHAT_TEMPLATE] = strdup(s);
	if (!h->section[COLI_SECTION_CHAT_TEMPLATE])
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	h->section_bytes[COLI_SECTION_CHAT_TEMPLATE] = strlen(s);
	return 0;
}

/* The shard list: the index's weight_map values in first-use order, or the
 * single model.safetensors. */
static int find_shards(struct coli_convert_hf *h, char *errbuf, size_t errlen)
{
	json_t *idx = NULL, *map, *v;
	const char *key;
	int rc;

	h->index_path = coli_convert_path_join(h->dir, "model.safetensors.index.json");
	if (!h->index_path)
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	if (access(h->index_path, F_OK)) {
		free(h->index_path);
		h->index_path = NULL;
		h->shards = calloc(1, sizeof(char *));
		if (!h->shards ||
		    !(h->shards[0] = coli_convert_path_join(h->dir, "model.safetensors")))
			return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
		h->n_shards = 1;
		if (access(h->shards[0], F_OK))
			return coli_convert_errf(
			    errbuf, errlen, -ENOENT,
			    "%s: no model.safetensors and no model.safetensors.index.json", h->dir);
		return 0;
	}
	rc = load_file(h, "model.safetensors.index.json", 0, 1, &idx, errbuf, errlen);
	if (rc)
		return rc;
	map = json_object_get(idx, "weight_map");
	if (!json_is_object(map) || !json_object_size(map)) {
		json_decref(idx);
		return coli_convert_errf(errbuf, errlen, -EINVAL, "%s: no \"weight_map\" object",
		                         h->index_path);
	}
	h->shards = calloc(json_object_size(map), sizeof(char *));
	if (!h->shards) {
		json_decref(idx);
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	}
	json_object_foreach(map, key, v)
	{
		const char *f = json_string_value(v);
		char *p;
		int dup = 0;

		if (!f || !*f || strchr(f, '/')) {
			/* the message first: key lives in idx */
			coli_convert_errf(
			    errbuf, errlen, -EINVAL,
			    "%s: weight_map entry for '%s' is not a file name in the same "
			    "directory",
			    h->index_path, key);
			json_decref(idx);
			return -EINVAL;
		}
		p = coli_convert_path_join(h->dir, f);
		if (!p) {
			json_decref(idx);
			return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
		}
		for (int i = 0; i < h->n_shards && !dup; i++)
			dup = !strcmp(h->shards[i], p);
		if (dup)
			free(p);
		else
			h->shards[h->n_shards++] = p;
	}
	json_decref(idx);
	return 0;
}

int coli_convert_hf_load(const char *dir, enum coli_dtype quant, struct coli_convert_hf *h,
                         char *errbuf, size_t errlen)
{
	json_t *cfg = NULL, *gen = NULL, *tokcfg = NULL;
	char *cjson = NULL, tmp[512];
	int rc;

	memset(h, 0, sizeof(*h));
	h->dir = strdup(dir);
	if (!h->dir)
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	rc = load_file(h, "config.json", COLI_SECTION_HF_CONFIG, 1, &cfg, errbuf, errlen);
	if (!rc)
		rc = load_file(h, "generation_config.json", COLI_SECTION_GEN_CONFIG, 0, &gen,
		               errbuf, errlen);
	if (!rc)
		rc = load_file(h, "tokenizer_config.json", COLI_SECTION_TOKENIZER_CONFIG, 0,
		               &tokcfg, errbuf, errlen);
	if (!rc)
		rc =
		    load_file(h, "tokenizer.json", COLI_SECTION_TOKENIZER, 0, NULL, errbuf, errlen);
	if (!rc && !h->section[COLI_SECTION_TOKENIZER]) /* Kimi's: a tiktoken rank file */
		rc = coli_convert_tiktoken_load(h, tokcfg, errbuf, errlen);
	if (!rc)
		rc = load_chat_template(h, tokcfg, errbuf, errlen);
	if (!rc)
		rc = coli_convert_hf_config(h, cfg, gen, quant, errbuf, errlen);
	if (!rc) {
		/* Round-trip through the engine's own parser: its range checks apply. */
		cjson = coli_config_format(&h->cfg);
		if (!cjson) {
			rc = coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
		} else {
			struct coli_model_config back;

			rc = coli_config_parse(cjson, strlen(cjson), &back, tmp, sizeof(tmp));
			if (rc)
				coli_convert_errf(errbuf, errlen, rc, "%s/config.json: %s", dir,
				                  tmp);
		}
	}
	if (!rc) {
		h->section[COLI_SECTION_CONFIG] = cjson;
		h->section_bytes[COLI_SECTION_CONFIG] = strlen(cjson);
		cjson = NULL;
		rc = find_shards(h, errbuf, errlen);
	}
	if (!rc && !h->section[COLI_SECTION_TOKENIZER])
		fprintf(stderr,
		        "coli convert: warning: %s has no tokenizer.json; the container will "
		        "refuse text commands (token ids still work)\n",
		        dir);
	free(cjson);
	json_decref(cfg);
	json_decref(gen);
	json_decref(tokcfg);
	if (rc)
		coli_convert_hf_free(h);
	return rc;
}

int coli_convert_hf_open_shards(struct coli_convert_hf *h, char *errbuf, size_t errlen)
{
	h->st = calloc(h->n_shards, sizeof(*h->st));
	if (!h->st)
		return coli_convert_errf(errbuf, errlen, -ENOMEM, "out of memory");
	for (int i = 0; i < h->n_shards; i++)
		h->st[i].fd = -1;
	for (int i = 0; i < h->n_shards; i++) {
		int rc = coli_io_st_open(h->shards[i], &h->st[i]);

		if (rc == -ENOENT && h->index_path)
			return coli_convert_errf(errbuf, errlen, rc,
			                         "%s: missing shard (named by %s)", h->shards[i],
			                         h->index_path);
		if (rc)
			return coli_convert_errf(errbuf, errlen, rc, "%s", coli_io_errmsg());
	}
	return 0;
}

void coli_convert_hf_free(struct coli_convert_hf *h)
{
	for (int i = 0; i < h->n_shards; i++) {
		if (h->st)
			coli_io_st_close(&h->st[i]);
		free(h->shards[i]);
	}
	free(h->st);
	free(h->shards);
	free(h->index_path);
	for (int i = 0; i < COLI_CONVERT_N_SECTIONS; i++)
		free(h->section[i]);
	free(h->dir);
	free(h->ggml);
	memset(h, 0, sizeof(*h));
}
