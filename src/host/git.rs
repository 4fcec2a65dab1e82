//! The git state of a directory, read with the `git` command itself (no
//! library: the three questions below are plumbing commands whose output
//! is stable, and the static binary stays free of libgit2). Absent outside
//! a repository, or where `git` is not installed. [`GitInfo`] is the record
//! results.json keeps (`fairground history` orders runs by it).

use std::path::Path;
use std::process::Command;

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

/// One `git` plumbing command in `dir`; its trimmed stdout when it exits 0.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        // A user's pager or colour settings must not reach plumbing output.
        .env("GIT_PAGER", "cat")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Commit, dirty flag, branch and commit time of the repository holding
/// `dir`; `None` when `dir` is not inside one.
pub fn read(dir: &Path) -> Option<GitInfo> {
    let commit = git(dir, &["rev-parse", "--verify", "HEAD"])?;
    if commit.is_empty() {
        return None;
    }
    let dirty = git(dir, &["status", "--porcelain"]).is_some_and(|s| !s.is_empty());
    let branch =
        git(dir, &["symbolic-ref", "--quiet", "--short", "HEAD"]).filter(|b| !b.is_empty());
    let commit_time = git(dir, &["show", "-s", "--format=%cI", "HEAD"]).filter(|t| !t.is_empty());
    Some(GitInfo {
        commit,
        dirty,
        branch,
        commit_time,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    }

    #[test]
    fn reads_commit_branch_and_dirt_and_nothing_outside_a_repository() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None, "not a repository");
        sh(dir.path(), &["init", "-q", "-b", "trunk"]);
        assert_eq!(read(dir.path()), None, "a repository without a commit");
        std::fs::write(dir.path().join("a"), "1").unwrap();
        sh(dir.path(), &["add", "a"]);
        sh(dir.path(), &["commit", "-q", "-m", "one"]);
        let clean = read(dir.path()).unwrap();
        assert_eq!(clean.commit.len(), 40, "{clean:?}");
        assert_eq!(clean.branch.as_deref(), Some("trunk"));
        assert!(!clean.dirty);
        assert!(clean.commit_time.is_some());
        std::fs::write(dir.path().join("a"), "2").unwrap();
        let dirty = read(dir.path()).unwrap();
        assert!(dirty.dirty && dirty.short().ends_with("+dirty"));
        sh(dir.path(), &["checkout", "-q", "--detach"]);
        assert_eq!(read(dir.path()).unwrap().branch, None, "detached HEAD");
    }
}
