//! CPython's greenlet, through `benches/python/run.sh --kv` (which makes its
//! venv with pip on first use): its `key value` lines, by key.
//!
//! Uses `std::process` only.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

/// The script, found from this package's directory.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../python/run.sh")
}

/// Run the script; its figures by key (`round_trip_ns`, `switch_ns`, ...).
pub(crate) fn figures() -> Result<HashMap<String, String>, String> {
    let out = Command::new(script())
        .arg("--kv")
        .output()
        .map_err(|err| format!("running {}: {err}", script().display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            script().display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect())
}
