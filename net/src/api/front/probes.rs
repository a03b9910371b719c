//! `/livez` and `/readyz` (issue #50): the two answers orchestrators ask for, on every role.
//! Liveness is 200 while the process serves at all (a supervisor restarts it otherwise);
//! readiness is 200 only while the node should get traffic: a single process or an api node
//! once started with storage writable, NATS reached (api) and some venue live; a market node
//! while it owns its partition's lease. Each body names the role and the state, and why it is
//! not ready. A standby, before it owns its partition, answers from the waiting responder
//! (`tools/src/starting.rs`): live, not ready, with the owner's epoch.

use hyper::StatusCode;

use super::answer::{respond, Resp};
use super::health::HealthApi;
use rampart_cluster::node::Role;
use rampart_state::json::Json;

/// What a node's readiness is made of.
pub(super) struct Readiness {
    /// Ready for traffic (or, a market node, owning its partition).
    pub ready: bool,
    /// `single`, `api` or `market`.
    pub role: &'static str,
    /// `starting`, `serving`, `degraded` (single, api), `owner` or `fenced` (market).
    pub state: &'static str,
    /// Why it is not ready, or what is degraded.
    pub reason: Option<String>,
}

impl HealthApi {
    /// The node's readiness at `now_ms`, as `/healthz` decides its status code.
    pub(super) fn readiness(&self, now_ms: i64) -> Readiness {
        let v = self.verdict(now_ms);
        let role = self.cluster.as_ref().map_or("single", |c| c.role.as_str());
        let market = self.cluster.as_ref().filter(|c| c.role == Role::Market);
        let state = match (market, v.started, v.ready) {
            (Some(c), _, _) if c.ownership.as_ref().is_some_and(|o| !o.is_owner(now_ms)) => "fenced",
            (Some(_), false, _) => "starting",
            (Some(_), true, _) => "owner",
            (None, false, _) => "starting",
            (None, true, true) if v.reason.is_none() => "serving",
            (None, true, _) => "degraded",
        };
        Readiness { ready: v.ready, role, state, reason: v.reason }
    }

    /// `GET /livez`: 200 `{"status":"live","role","state","uptimeS"}` while the front serves.
    pub(super) fn livez(&self, now_ms: i64) -> Resp {
        let r = self.readiness(now_ms);
        let mut j = Json::with_capacity(128);
        j.raw("{\"status\":\"live\",\"role\":").str(r.role).raw(",\"state\":").str(r.state);
        j.raw(",\"uptimeS\":").int((now_ms - self.started_ms) / 1000).raw("}");
        respond(StatusCode::OK, j.finish())
    }

    /// `GET /readyz`: 200 `{"status":"ready",…}` or 503 `{"status":"not ready",…}`, with the
    /// role, the state, the reason, and (market) the partition and epoch or (api) the
    /// partitions whose snapshots are stale.
    pub(super) fn readyz(&self, now_ms: i64) -> Resp {
        let r = self.readiness(now_ms);
        let mut j = Json::with_capacity(192);
        j.raw("{\"status\":").str(if r.ready { "ready" } else { "not ready" });
        j.raw(",\"role\":").str(r.role).raw(",\"state\":").str(r.state).raw(",\"reason\":");
        match &r.reason {
            Some(why) => j.str(why),
            None => j.raw("null"),
        };
        if let Some(c) = &self.cluster {
            match c.role {
                Role::Market => {
                    j.raw(",\"partition\":").str(&c.partition.to_string()).raw(",\"epoch\":");
                    match &c.ownership {
                        Some(o) => j.int(o.epoch),
                        None => j.raw("null"),
                    };
                }
                Role::Api => {
                    j.raw(",\"stalePartitions\":[");
                    for (n, p) in c.stale_partitions(now_ms).iter().enumerate() {
                        if n > 0 {
                            j.raw(",");
                        }
                        j.int(i64::from(*p));
                    }
                    j.raw("]");
                }
            }
        }
        j.raw("}");
        respond(if r.ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }, j.finish())
    }
}
