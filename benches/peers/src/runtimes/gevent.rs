//! gevent's side: `benches/python/run.sh --gevent --which` makes the venv
//! (gevent 26.9.0 by pip, on pyenv's CPython 3.11.7) on first use and
//! names its interpreter; the samples then run
//! `benches/python/gevent_bench.py --sample FIGURE COUNT --warm WARM` with
//! it directly (the venv check once, not per sample).
//!
//! Uses `std::process` only.

use std::path::PathBuf;
use std::process::Command;

fn python_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../python")
}

/// The bench script.
pub(super) fn script() -> PathBuf {
    python_dir().join("gevent_bench.py")
}

/// The venv's interpreter (made now if missing), or why there is none.
pub(super) fn interpreter() -> Result<PathBuf, String> {
    let run = python_dir().join("run.sh");
    let out = Command::new(&run)
        .args(["--gevent", "--which"])
        .output()
        .map_err(|err| format!("running {}: {err}", run.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} --gevent --which failed ({}): {}",
            run.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    match path.is_empty() {
        true => Err(format!(
            "{} --gevent --which named no interpreter",
            run.display()
        )),
        false => Ok(PathBuf::from(path)),
    }
}
