"""tests/daemon/json_schema_py.py — structured output against the reference validator.

Random JSON schemas (seeded; objects with properties in their order, required
subsets, additionalProperties, arrays with item bounds, strings with length
bounds, numbers, integers, booleans, null, enums, consts, anyOf / type lists,
nested $defs references, recursion) go to colid as response_format json_schema;
the demo model samples N_PER choices for each (n, temperature 1), and every
content must parse as JSON and validate under its schema with the `jsonschema`
package (Draft 2020-12), a finish_reason "length" counting as a failure.
Then response_format json_object, and schemas colid must refuse with a 400
naming the keyword.

COLI_SCHEMAS (default 12) schemas, COLI_SCHEMA_SEED (1) the generator's seed;
the full run of the target (200 schemas, 500 outputs):
  COLI_SCHEMAS=200 COLI_SCHEMA_N=5 sh tests/run.sh daemon/json_schema
(every second schema asks for 2 choices and the others for 3: 500 outputs.)"""
import json
import os
import random

import jsonschema

from colid_util import Colid, check, fail, post

NAMES = ["name", "age", "id", "tags", "a b", "naïve", "q\"uote", "x", "value", "items",
         "kind", "ok", "città", "back\\slash", "n"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.defs = {}

    def scalar(self):
        r = self.r
        k = r.choice(["string", "string", "integer", "number", "boolean", "null", "enum",
                      "const"])
        if k == "string":
            s = {"type": "string"}
            if r.random() < 0.8:
                s["maxLength"] = r.randint(1, 16)
            if r.random() < 0.3:
                s["minLength"] = r.randint(0, min(2, s.get("maxLength", 2)))
            return s
        if k == "enum":
            pool = ["red", "green", "blue", "é", 1, 2, 12, -3, 2.5, True, False, None, "a\"b"]
            return {"enum": r.sample(pool, r.randint(1, 5))}
        if k == "const":
            return {"const": r.choice(["on", 7, None, True, "x y"])}
        return {"type": k}

    def schema(self, depth):
        r = self.r
        roll = r.random()
        if depth >= 3 or roll < 0.35:
            return self.scalar()
        if roll < 0.6:
            return self.obj(depth)
        if roll < 0.75:
            s = {"type": "array", "items": self.schema(depth + 1)}
            lo = r.randint(0, 2)
            if lo:
                s["minItems"] = lo
            s["maxItems"] = lo + r.randint(0, 3)
            return s
        if roll < 0.85:  # branches told apart by their first byte
            kinds = r.sample(["string", "integer", "null", "boolean", "object", "array"],
                             r.randint(2, 3))
            alts = []
            for k in kinds:
                if k == "object":
                    alts.append(self.obj(depth + 1))
                elif k == "array":
                    alts.append({"type": "array", "items": self.scalar(), "maxItems": 3})
                elif k == "string":
                    alts.append({"type": "string", "maxLength": 8})
                else:
                    alts.append({"type": k})
            return {r.choice(["anyOf", "oneOf"]): alts}
        if roll < 0.92:
            return {"type": r.choice([["string", "null"], ["integer", "null"],
                                      ["boolean", "string"]]), "maxLength": 10}
        name = "d%d" % len(self.defs)
        self.defs[name] = self.obj(depth + 1)
        return {"$ref": "#/$defs/" + name}

    def obj(self, depth):
        r = self.r
        names = r.sample(NAMES, r.randint(1, 4))
        props = {n: self.schema(depth + 1) for n in names}
        s = {"type": "object", "properties": props,
             "required": [n for n in names if r.random() < 0.6]}
        roll = r.random()
        if roll < 0.7:
            s["additionalProperties"] = False
        elif roll < 0.8:
            s["additionalProperties"] = True
        if r.random() < 0.2:
            s["description"] = "an object"
        return s

    def top(self):
        self.defs = {}
        s = self.obj(0)
        if self.r.random() < 0.15:  # a recursive tree under $defs
            self.defs["tree"] = {"type": "object", "properties": {
                "v": {"type": "integer"},
                "kids": {"type": "array", "items": {"$ref": "#/$defs/tree"}, "maxItems": 1}},
                "required": ["v"], "additionalProperties": False}
            s["properties"]["tree"] = {"$ref": "#/$defs/tree"}
        if self.defs:
            s["$defs"] = self.defs
        return s


def main():
    n_schemas = int(os.environ.get("COLI_SCHEMAS", "12"))
    seed = int(os.environ.get("COLI_SCHEMA_SEED", "1"))
    per = int(os.environ.get("COLI_SCHEMA_N", "4"))  # outputs per 2 schemas
    model = os.path.join(os.environ.get("ROOT", "."), os.environ.get("BUILD", "build"),
                         "demo.coli")
    if not os.path.exists(model):
        from colid_util import COLI
        import subprocess
        r = subprocess.run([COLI, "convert", os.path.join(os.environ.get("ROOT", "."),
                                                          "models", "demo"), "-o", model],
                           capture_output=True, text=True)
        check(r.returncode == 0, "convert demo: " + r.stderr[-400:])
    gen = Gen(seed)
    srv = Colid(model)
    n_out = n_ok = 0
    try:
        for i in range(n_schemas):
            schema = gen.top()
            jsonschema.Draft202012Validator.check_schema(schema)
            n = per // 2 + (per % 2 if i % 2 else 0)
            body = {"messages": [{"role": "user", "content": "Answer in JSON."}],
                    "max_tokens": 1500, "temperature": 1, "seed": seed * 1000 + i, "n": n,
                    "response_format": {"type": "json_schema",
                                        "json_schema": {"name": "s%d" % i, "schema": schema,
                                                        "strict": True}}}
            st, _, data = post(srv.port, "/v1/chat/completions", body, timeout=600)
            check(st == 200, "schema %d: HTTP %d %s\n%s" % (i, st, data[:400],
                                                           json.dumps(schema)))
            for c in json.loads(data)["choices"]:
                n_out += 1
                text = c["message"]["content"]
                try:
                    if c["finish_reason"] != "stop":
                        raise ValueError("finish_reason " + c["finish_reason"])
                    jsonschema.validate(json.loads(text), schema,
                                        cls=jsonschema.Draft202012Validator)
                    n_ok += 1
                except Exception as ex:  # noqa: BLE001 (any failure is reported whole)
                    print("INVALID (schema %d): %s\nschema: %s\noutput: %r" %
                          (i, str(ex)[:300], json.dumps(schema), text[:2000]))
        print("json_schema: %d/%d outputs valid over %d schemas (seed %d)" %
              (n_ok, n_out, n_schemas, seed))
        # json_object: any object
        st, _, data = post(srv.port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "JSON please"}], "max_tokens": 1200,
            "temperature": 1, "seed": 5, "n": 2, "response_format": {"type": "json_object"}})
        check(st == 200, "json_object: HTTP %d %s" % (st, data[:300]))
        for c in json.loads(data)["choices"]:
            if c["finish_reason"] == "stop":
                check(isinstance(json.loads(c["message"]["content"]), dict),
                      "json_object: not an object: %r" % c["message"]["content"][:300])
        # refused by name
        for bad, word in [({"type": "string", "pattern": "^a"}, "pattern"),
                          ({"type": "integer", "minimum": 1}, "minimum"),
                          ({"allOf": [{"type": "string"}]}, "allOf"),
                          ({"anyOf": [{"type": "object"}, {"type": "object"}]}, "anyOf")]:
            st, _, data = post(srv.port, "/v1/chat/completions", {
                "messages": [{"role": "user", "content": "x"}], "max_tokens": 4,
                "response_format": {"type": "json_schema",
                                    "json_schema": {"name": "b", "schema": bad}}})
            err = json.loads(data).get("error", {})
            check(st == 400 and word in err.get("message", "") and
                  err.get("param") == "response_format",
                  "%s: HTTP %d %s" % (word, st, data[:300]))
    finally:
        srv.stop()
    if n_ok != n_out:
        fail("%d of %d outputs invalid" % (n_out - n_ok, n_out))


if __name__ == "__main__":
    main()
