#!/bin/sh
# Seeds for tools/fuzz/fuzz_sse.c: responses as colid and other servers send them
# (the first byte of each file is the piece size, see the target).
out=$1
mkdir -p "$out"
printf '\007HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n1c\r\ndata: {"choices":[{"text":"a"}]}\n\n\r\n10\r\ndata: [DONE]\n\n\r\n0\r\n\r\n' >"$out/chunked_sse"
printf '\100HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 27\r\n\r\n{"error":{"message":"bad"}}' >"$out/length"
printf '\001HTTP/1.0 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n\r\n: comment\r\nevent: x\r\ndata:a\r\ndata: b\r\n\r\ndata: [DONE]' >"$out/to_eof"
printf '\003HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-Trailer: y\r\n\r\n' >"$out/continue"
