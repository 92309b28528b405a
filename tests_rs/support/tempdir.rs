//! A temporary directory removed on drop.

use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir; removed (recursively) on drop.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/penguin-test-<label>-<random>`.
    pub fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "penguin-test-{label}-{}-{:08x}",
            std::process::id(),
            rand_u32()
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        // Canonical, so tests can compare against paths the harness reports.
        let path = path.canonicalize().unwrap_or(path);
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u32
}
