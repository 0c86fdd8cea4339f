//! The native invoke path: body parsing, schema validation and the call, for
//! a pure tool (calc) and a workspace tool (files), any body.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolhost_fuzz::{check, post};

fuzz_target!(|data: &[u8]| {
    let (path, body) = match data.split_first() {
        Some((b, rest)) if b % 2 == 0 => ("/tools/calc_evaluate/invoke", rest),
        Some((_, rest)) => ("/tools/files_read/invoke", rest),
        None => return,
    };
    let (status, answer) = post(path, &[("x-toolhost-session", "fuzz")], body.to_vec());
    check(path, status, &answer);
});
