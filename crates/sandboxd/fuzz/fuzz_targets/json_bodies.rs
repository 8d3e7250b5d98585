//! Any bytes as each JSON body the daemon takes, and what parses through the checks the
//! daemon makes before acting on it: errors, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sandboxd::proto::{
    check_command, check_path, ExecSpec, MkdirRequest, ProcessSpec, RenameRequest, SignalRequest,
    WaitPort,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(spec) = serde_json::from_slice::<ExecSpec>(data) {
        let _ = check_command(&spec.argv, &spec.env);
        if let Some(cwd) = &spec.cwd {
            let _ = check_path(cwd);
        }
    }
    if let Ok(spec) = serde_json::from_slice::<ProcessSpec>(data) {
        let _ = check_command(&spec.argv, &spec.env);
    }
    if let Ok(r) = serde_json::from_slice::<RenameRequest>(data) {
        let _ = serde_json::to_vec(&r);
    }
    if let Ok(r) = serde_json::from_slice::<MkdirRequest>(data) {
        let _ = serde_json::to_vec(&r);
    }
    let _ = serde_json::from_slice::<SignalRequest>(data);
    let _ = serde_json::from_slice::<WaitPort>(data);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = check_path(text);
    }
});
