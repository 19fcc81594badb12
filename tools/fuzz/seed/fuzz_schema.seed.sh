#!/bin/sh
# Seeds for tools/fuzz/fuzz_schema.c: a mode byte (0 a schema, 1 a tools array),
# the text, a NUL, a text to match. Usage: fuzz_schema.seed.sh DIR
s() { printf '%b' "$2" >"$1/$3"; }
s "$1" '\000{"type":"object","properties":{"name":{"type":"string","maxLength":4},"age":{"type":"integer"}},"required":["name"],"additionalProperties":false}\000{"name":"ab","age":12}' seed-object
s "$1" '\000{"type":"array","items":{"enum":["a",1,null,true]},"minItems":1,"maxItems":3}\000["a",1]' seed-array
s "$1" '\000{"$defs":{"n":{"type":"object","properties":{"v":{"type":"number"},"next":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"null"}]}},"required":["v"]}},"$ref":"#/$defs/n"}\000{"v":1.5e3,"next":{"v":-0.25,"next":null}}' seed-ref
s "$1" '\000{"type":["string","null"],"minLength":1}\000"\\u00e9\\n\303\251"' seed-union
s "$1" '\000{}\000{"a":[1,{"b":"c"},true]}' seed-any
s "$1" '\000{"oneOf":[{"type":"integer"},{"type":"array"},{"const":"x"}]}\000[[],{}]' seed-oneof
s "$1" '\001[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"x":{"type":"boolean"}}}}},{"type":"function","function":{"name":"g"}}]\000<tool_call>\n{"name": "f", "arguments": {"x": true}}\n</tool_call>' seed-tools
s "$1" '\005[{"type":"function","function":{"name":"get","parameters":{"type":"object","properties":{"u":{"enum":["C","F"]}}}}},{"type":"function","function":{"name":"time"}}]\000 to=functions.get' seed-harmony
exit 0
