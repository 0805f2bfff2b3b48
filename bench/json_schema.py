"""The cost of one try of a JSON Schema output's constraint (ninfer.engine.json_schema), against the length of the
output so far: the incremental parse that JsonSchemaPrefix keeps, beside the parse from scratch of the whole text
(the peer, what every try cost before session 22), on one CPU core.

    python bench/json_schema.py
"""

from __future__ import annotations

import json
import time

from ninfer.engine.json_schema import JsonSchemaPrefix, _Parse

SCHEMA = {"type": "object", "required": ["items"], "additionalProperties": False, "properties": {"items": {
    "type": "array", "items": {"type": "object", "required": ["id", "name"], "additionalProperties": False,
                               "properties": {"id": {"type": "integer", "minimum": 0},
                                              "name": {"type": "string", "pattern": "^[a-z ]+[0-9]*$"},
                                              "tags": {"type": "array", "items": {"type": "string"}}}}}}}


def main():
    print("| output so far | one try, incremental | one try, from scratch (peer) | whole output fed 4 bytes at a time |")
    print("|---:|---:|---:|---:|")
    for n in (10, 50, 200, 800):
        doc = {"items": [{"id": i, "name": f"item number {i}", "tags": ["a", "bb"]} for i in range(n)]}
        text = json.dumps(doc).encode()[:-2]  # open at the end, as while generating
        p = JsonSchemaPrefix(SCHEMA)
        t0 = time.perf_counter()
        for i in range(0, len(text), 4):
            assert p.feed(text[i:i + 4])
        whole = time.perf_counter() - t0
        reps = 50
        t0 = time.perf_counter()
        for _ in range(reps):
            p.feed(b"x")  # refused: the text stays, as a refused token's try
        inc = (time.perf_counter() - t0) / reps
        reps = max(3, 20 // max(1, n // 50))
        t0 = time.perf_counter()
        for _ in range(reps):
            _Parse(SCHEMA, text + b",").root()
        scratch = (time.perf_counter() - t0) / reps
        print(f"| {len(text) / 1024:.1f} KB | {inc * 1e3:.2f} ms | {scratch * 1e3:.2f} ms | {whole:.2f} s |", flush=True)


if __name__ == "__main__":
    main()
