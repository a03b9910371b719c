//! A consistent copy of a running server's SQLite database (`rampart backup`, issue #62).
//!
//! `VACUUM INTO` reads the whole database inside one read transaction and writes a compacted copy
//! to a new file. In WAL mode a reader never blocks the writers (they append to the WAL while the
//! copy reads its snapshot), so a server goes on recording firings and creating alerts through
//! the whole backup; only a checkpoint cannot pass the snapshot until it ends (the WAL grows
//! meanwhile). The copy is written under a temporary name beside the target and renamed into place
//! once whole, so a target that exists is always a complete backup. PostgreSQL is backed up with
//! its own tools (`pg_dump`, base backups: `deploy/README.md`).

use std::path::{Path, PathBuf};

use super::conn::Store;
use crate::db::{vals, StoreError};

/// What a backup wrote.
#[derive(Debug)]
pub struct Backup {
    /// The file.
    pub file: PathBuf,
    /// Its size, bytes.
    pub bytes: u64,
}

impl Store {
    /// Writes a consistent copy of this SQLite database to `file`, which must not exist.
    pub fn backup_into(&self, file: &Path) -> Result<Backup, StoreError> {
        if self.is_postgres() {
            return Err(StoreError::Unavailable(
                "a PostgreSQL database is backed up with pg_dump or a base backup (deploy/README.md)",
            ));
        }
        if file.exists() {
            let why = format!("{} exists already; choose a new file", file.display());
            return Err(StoreError::Io(std::io::Error::new(std::io::ErrorKind::AlreadyExists, why)));
        }
        let mut partial = file.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        // A partial file left by a backup that was killed is not a backup: start again.
        let _ = std::fs::remove_file(&partial);
        let target = partial.to_str().ok_or_else(|| {
            StoreError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, "the backup's path is not UTF-8"))
        })?;
        self.db.execute("VACUUM INTO ?1", vals![target])?;
        std::fs::rename(&partial, file).map_err(StoreError::Io)?;
        let bytes = std::fs::metadata(file).map_err(StoreError::Io)?.len();
        Ok(Backup { file: file.to_owned(), bytes })
    }
}

#[cfg(test)]
mod tests {
    use crate::store::test_support::temp_dir;
    use crate::store::Store;

    #[test]
    fn a_backup_is_a_whole_database_and_never_overwrites_a_file() {
        let dir = temp_dir("backup-source");
        let mut store = Store::open(&dir).expect("store");
        let key = store.create_account_with_key("developer", None, 1).expect("account");
        let file = temp_dir("backup-target").join("copy.db");
        std::fs::create_dir_all(file.parent().expect("parent")).expect("dir");
        let made = store.backup_into(&file).expect("backup");
        assert_eq!(made.bytes, std::fs::metadata(&file).expect("file").len());
        assert!(!file.with_extension("db.partial").exists(), "the partial file was renamed");
        let again = store.backup_into(&file).expect_err("the file exists");
        assert!(again.to_string().contains("exists already"), "{again}");
        // The copy opens as a data directory of its own, with the account and its key.
        let restored = temp_dir("backup-restored");
        std::fs::create_dir_all(&restored).expect("dir");
        std::fs::copy(&file, restored.join("rampart.db")).expect("copy");
        let copy = Store::open(&restored).expect("the backup opens");
        let keys = copy.list_keys().expect("keys");
        assert!(keys.iter().any(|k| k.account_id == key.account_id), "the account's key is in the backup");
    }
}
