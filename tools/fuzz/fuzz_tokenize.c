/*
 * tools/fuzz/fuzz_tokenize.c — libFuzzer target for colid's /tokenize and
 * /detokenize body parser (tools/colid/request/colid_tokenize.c): the input is a body,
 * parsed in both shapes; an accepted /tokenize text is encoded with the
 * fixture tokenizer (tools/fuzz/fuzz_tok.h) and an accepted id list, clipped to
 * the vocabulary as colid does, decoded; an error is formatted as colid
 * replies it. Checked beyond ASan/UBSan: an accepted body has its text or
 * its ids (each >= 0), and an error names a 4xx/5xx status.
 *
 * fuzz-sources: tools/colid/request/colid_tokenize.c tools/colid/request/colid_request.c
 * fuzz-sources: tools/colid/request/colid_request_input.c
 * fuzz-sources: tools/colid/request/colid_request_output.c
 */
#include <stdlib.h>
#include <string.h>

#include "tools/colid/colid.h"
#include "tools/fuzz/fuzz_tok.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const coli_tokenizer_t *tok = fixture_tokenizer();

	for (int detok = 0; detok < 2; detok++) {
		struct colid_tokenize_req r;
		struct colid_error e;

		if (colid_tokenize_parse((const char *)data, size, detok, &r, &e)) {
			char *j = colid_error_json(&e);

			if (e.status < 400 || e.status > 599)
				abort();
			free(j);
			continue;
		}
		if (!detok) {
			int *ids = NULL, n = 0;
			char err[128];

			if (!r.text)
				abort();
			if (tok)
				coli_tokenizer_encode(tok, r.text, r.len, &ids, &n, err,
				                      sizeof(err));
			free(ids);
		} else {
			int vocab = tok ? coli_tokenizer_n_vocab(tok) : 0, ok = 1;
			char *text = NULL;
			size_t len = 0;

			if (!r.has_ids || r.n_ids < 0)
				abort();
			for (int i = 0; i < r.n_ids; i++) {
				if (r.ids[i] < 0)
					abort();
				ok &= r.ids[i] < vocab;
			}
			if (tok && ok && !coli_tokenizer_decode(tok, r.ids, r.n_ids, &text, &len))
				free(text);
		}
		colid_tokenize_free(&r);
	}
	return 0;
}
