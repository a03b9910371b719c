//! `rampart sim-venue`: the simulator of the four venues' protocols ([`crate::simvenue`]),
//! started from its flags and stopped on SIGTERM or Ctrl-C.

use anyhow::Result;

use crate::cli::SimVenueArgs;
use crate::config::parse_venues;
use crate::signal::wait_for_stop_signal;
use crate::simvenue;

/// `rampart sim-venue`: prints the bound address, then serves until SIGTERM or Ctrl-C.
pub(crate) fn run(args: SimVenueArgs) -> Result<()> {
    let mut delist = Vec::new();
    for d in &args.delist {
        delist.push(simvenue::DelistPlan::parse(d).map_err(|e| anyhow::anyhow!(e))?);
    }
    let config = simvenue::Config {
        listen: args.listen,
        seed: args.seed,
        sim_pairs: args.sim_pairs,
        venues: parse_venues(&args.venues)?,
        faults: simvenue::Faults {
            gap_every: args.fault_gap_every,
            checksum_every: args.fault_checksum_every,
            stale_snapshot_every: args.fault_stale_snapshot_every,
            disconnect_every_s: args.fault_disconnect_every_s,
        },
        delist,
        okx_checksum_zero: args.okx_checksum_zero,
        bitget_checksum: !args.bitget_no_checksum,
        ping_interval_s: args.ping_interval_s,
        idle_close_s: args.idle_close_s,
        okx_heartbeat_s: args.okx_heartbeat_s,
        queue_messages_max: args.queue_messages_max,
        connections_max: args.connections_max,
        step_ms: args.step_ms,
    };
    let handle = simvenue::start(config)?;
    {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, "sim-venue listening on {}", handle.url())?;
        out.flush()?;
    }
    wait_for_stop_signal()?;
    tracing::info!("sim-venue: shutting down");
    handle.stop();
    Ok(())
}
