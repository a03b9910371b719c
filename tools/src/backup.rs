//! `rampart backup FILE`: a consistent copy of a running single process's SQLite database
//! (`rampart_store::store::Backup`), written while the server goes on writing.

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::cli::KeysArgs;

/// Writes the backup and says where, how large and how long it took.
pub(crate) fn run(file: &Path, common: &KeysArgs) -> Result<()> {
    let args = KeysArgs { create: false, ..common.clone() };
    let (store, _) = crate::config::open_store(&args)?;
    let started = Instant::now();
    let backup = store.backup_into(file).with_context(|| format!("backing up to {}", file.display()))?;
    println!(
        "backup written: {} ({} bytes in {} ms); restore: stop the server, put it in place as <data dir>/rampart.db, start it",
        backup.file.display(),
        backup.bytes,
        started.elapsed().as_millis()
    );
    Ok(())
}
