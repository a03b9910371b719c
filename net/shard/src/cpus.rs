//! Which CPU each shard's executor is pinned to.
//!
//! `auto` (the default) pins shards to CPUs of the process's allowed set (`Cpus_allowed_list`
//! in `/proc/self/status`, so `taskset` and container CPU sets are honoured) that no other
//! rampart process on the host has claimed: a claim is an exclusive lock on
//! `<lock dir>/rampart-cpu-<n>.lock`, held for the life of the process (the OS drops it when the
//! process ends, however it ends). A shard that finds no free CPU runs unpinned, and the log
//! says so. `none` pins nothing; a list (`0,2,4-6`) pins shard i to the i-th CPU of the list
//! (cycling), claimed when free and used anyway when not (the operator chose it; logged).

use std::fs::File;
use std::path::Path;

/// How shards are placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CpuPolicy {
    /// Free CPUs of the allowed set, else unpinned.
    Auto,
    /// Unpinned.
    None,
    /// These CPUs, in order.
    List(Vec<usize>),
}

/// Why a `--cpus` value was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuPolicyError(String);

impl std::fmt::Display for CpuPolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid --cpus '{}'. Allowed: auto, none, or a list such as 0,2,4-6", self.0)
    }
}

impl std::error::Error for CpuPolicyError {}

impl CpuPolicy {
    /// Parses `auto`, `none` or a CPU list.
    pub fn parse(text: &str) -> Result<CpuPolicy, CpuPolicyError> {
        match text.trim() {
            "auto" => Ok(CpuPolicy::Auto),
            "none" => Ok(CpuPolicy::None),
            list => parse_list(list).filter(|l| !l.is_empty()).map(CpuPolicy::List).ok_or(CpuPolicyError(text.into())),
        }
    }
}

/// CPUs at most in a list (a bound on what a typo such as `0-4000000000` can ask for).
const LIST_CPUS_MAX: usize = 4_096;

/// Parses the kernel's list format: `0-3,8,10-11`.
pub fn parse_list(text: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>().ok()?, b.trim().parse::<usize>().ok()?),
            None => {
                let a = part.parse::<usize>().ok()?;
                (a, a)
            }
        };
        if a > b || b >= LIST_CPUS_MAX {
            return None;
        }
        out.extend(a..=b);
    }
    Some(out)
}

/// The CPUs this process may run on, from `/proc/self/status` (empty when unknown).
pub fn allowed() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .and_then(|l| parse_list(l.trim()))
        .unwrap_or_default()
}

/// The placement chosen for each shard, with the claims that keep other processes off its CPUs.
#[derive(Debug)]
pub struct CpuClaims {
    /// Per shard: its CPU, or `None` (unpinned).
    pub cpus: Vec<Option<usize>>,
    /// Held locks; dropping them releases the CPUs.
    _locks: Vec<File>,
}

/// Tries to claim `cpu` under `dir`.
fn claim(dir: &Path, cpu: usize) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(format!("rampart-cpu-{cpu}.lock")))
        .ok()?;
    file.try_lock().ok().map(|()| file)
}

/// Places `shards` shards by `policy` among `allowed` CPUs, claiming them under `lock_dir`.
pub fn choose(policy: &CpuPolicy, shards: usize, allowed: &[usize], lock_dir: &Path) -> CpuClaims {
    let mut locks = Vec::new();
    let cpus = match policy {
        CpuPolicy::None => vec![None; shards],
        CpuPolicy::List(list) => (0..shards)
            .map(|i| {
                let cpu = list[i % list.len()];
                match claim(lock_dir, cpu) {
                    Some(f) => locks.push(f),
                    None => tracing::warn!("CPU {cpu} (--cpus) is also used by another rampart process"),
                }
                Some(cpu)
            })
            .collect(),
        CpuPolicy::Auto => {
            let mut free = allowed.iter().copied();
            (0..shards)
                .map(|_| {
                    let found = free.by_ref().find_map(|cpu| claim(lock_dir, cpu).map(|f| (cpu, f)));
                    found.map(|(cpu, f)| {
                        locks.push(f);
                        cpu
                    })
                })
                .collect()
        }
    };
    CpuClaims { cpus, _locks: locks }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_and_lists_parse() {
        assert_eq!(CpuPolicy::parse("auto"), Ok(CpuPolicy::Auto));
        assert_eq!(CpuPolicy::parse("none"), Ok(CpuPolicy::None));
        assert_eq!(CpuPolicy::parse("0,2,4-6"), Ok(CpuPolicy::List(vec![0, 2, 4, 5, 6])));
        for bad in ["", "x", "3-1", "0-99999", "-1", "1,,a"] {
            assert!(CpuPolicy::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_list("0-1\n"), Some(vec![0, 1]));
    }

    #[test]
    fn two_processes_worth_of_claims_do_not_share_a_cpu() {
        let dir = std::env::temp_dir().join(format!("rampart-cpus-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let a = choose(&CpuPolicy::Auto, 1, &[0, 1], &dir);
        let b = choose(&CpuPolicy::Auto, 1, &[0, 1], &dir);
        let c = choose(&CpuPolicy::Auto, 1, &[0, 1], &dir);
        assert_eq!((a.cpus.clone(), b.cpus.clone()), (vec![Some(0)], vec![Some(1)]));
        assert_eq!(c.cpus, vec![None], "no free CPU: unpinned");
        drop(a);
        let d = choose(&CpuPolicy::Auto, 1, &[0, 1], &dir);
        assert_eq!(d.cpus, vec![Some(0)], "released when its holder ends");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
