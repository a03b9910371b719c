//! The `rampart` command line: `serve` (the default) wires the engine, shards, storage and the
//! HTTP front together; `keys` manages API keys in the same data directory; `sim-venue` runs a
//! local simulator of the four venues' real protocols ([`simvenue`]).
//!
//! Settings come from flags, then `RAMPART_<NAME>` environment variables, then the TOML file
//! given by `--config`, then the defaults of `decisions.md` §1.
//!
//! Modules: `cli` (the clap definitions), `logging`, `config` (settings every command reads),
//! `signal` (the stop signals), one per command (`serve` with `node` for the cluster roles,
//! `keys`, `site_alerts`, `deliver`, `sim_venue`, `backup`), and [`starting`] (the 503 "starting" responder).

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

pub use config::default_data_dir;
pub use rampart_simvenue as simvenue;

mod backup;
mod cli;
mod config;
mod deliver;
mod keys;
mod logging;
mod role;
mod serve;
mod signal;
mod sim_venue;
mod site_alerts;
pub mod starting;

/// Runs the command line; returns the process exit code.
pub fn cli_main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => logging::init_logging(cli.serve.log_format.as_deref()).and_then(|()| serve::run(cli.serve)),
        Some(Command::Serve(args)) => {
            logging::init_logging(args.log_format.as_deref()).and_then(|()| serve::run(*args))
        }
        Some(Command::Keys { command, common }) => keys::run(command, common),
        Some(Command::SiteAlerts { command, common }) => {
            config::open_store(&common).and_then(|(store, plans)| site_alerts::run(command, &store, &plans))
        }
        Some(Command::SimVenue(args)) => logging::init_logging(None).and_then(|()| sim_venue::run(args)),
        Some(Command::Deliver(args)) => logging::init_logging(None).and_then(|()| deliver::run(args)),
        Some(Command::Backup { file, common }) => backup::run(&file, &common),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rampart: {e:#}");
            ExitCode::from(2)
        }
    }
}
