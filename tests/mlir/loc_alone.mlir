// A location with nothing after it: exit 1 with an error, never a crash (fuzz_parse found
// the reader computing a position without its arena).
// STAGE: parse
// ERROR-HAS: error:
loc(
