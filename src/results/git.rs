//! Where the code that was benchmarked came from: the git commit, whether
//! the work tree had changes, and the branch, as recorded in results.json
//! when a run is made inside a git repository (`fairground history` orders
//! runs by it). The reading is `host::git`; this is the record.

use serde::{Deserialize, Serialize};

/// The git state of the directory a run was started in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitInfo {
    /// `HEAD`'s commit, full hex.
    pub commit: String,
    /// Whether the work tree differed from `HEAD` (tracked changes, or
    /// untracked files not ignored): the figures then belong to code no
    /// commit holds.
    pub dirty: bool,
    /// The branch checked out; absent on a detached `HEAD` (as CI checks
    /// out a pull request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The commit's committer date (RFC 3339), to order runs of different
    /// commits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit_time: Option<String>,
}

impl GitInfo {
    /// The commit's first 12 hex digits, with `+dirty` when the tree had
    /// changes: how reports name it.
    pub fn short(&self) -> String {
        let c: String = self.commit.chars().take(12).collect();
        if self.dirty {
            format!("{c}+dirty")
        } else {
            c
        }
    }
}
