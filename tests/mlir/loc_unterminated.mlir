// A location string that ends inside an escape at the end of the file: one located error
// (fuzz_parse found the scan ran past the end of the text).
// STAGE: parse
// ERROR: FILE:5:18: error: unbalanced brackets
sdy.mesh @m = loc("a\