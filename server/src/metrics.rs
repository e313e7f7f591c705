//! Counters the server keeps and `/metrics` shows in the Prometheus text
//! format: requests by route and status, latency by route, refresh
//! outcomes, storage calls, and the catalogs' sizes.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::counting::{BackendCalls, Call};

/// Upper bounds of the latency buckets, in seconds.
const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// The server's counters.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
    refresh_fresh: AtomicU64,
    refresh_stale: AtomicU64,
    in_flight: AtomicU64,
    connections: Arc<AtomicU64>,
    /// MCP sessions open now.
    pub mcp_sessions: AtomicU64,
    /// MCP sessions refused by a cap.
    pub mcp_sessions_refused: AtomicU64,
    /// MCP sessions closed for being idle.
    pub mcp_sessions_expired: AtomicU64,
    /// Storage calls the tenants' namespaces made, by kind.
    pub backend_calls: Arc<BackendCalls>,
}

/// Counts a request as in flight until dropped.
#[derive(Debug)]
pub struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts a connection as open until dropped.
#[derive(Debug)]
pub struct OpenConnection(Arc<AtomicU64>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// Marks a connection open for as long as the guard lives.
    pub fn open_connection(&self) -> OpenConnection {
        self.connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(Arc::clone(&self.connections))
    }

    /// Counts one answered request.
    pub fn request(&self, route: &str, status: u16, elapsed: Duration) {
        {
            let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            match requests.get_mut(&(route.to_owned(), status)) {
                Some(n) => *n += 1,
                None => {
                    requests.insert((route.to_owned(), status), 1);
                }
            }
        }
        let seconds = elapsed.as_secs_f64();
        let mut latency = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        if !latency.contains_key(route) {
            latency.insert(route.to_owned(), Histogram::default());
        }
        let h = latency.get_mut(route).expect("inserted");
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// Marks a request in flight for as long as the guard lives.
    pub fn begin(&self) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(&self.in_flight)
    }

    /// Counts one refresh.
    pub fn refresh(&self, stale: bool) {
        if stale {
            self.refresh_stale.fetch_add(1, Ordering::Relaxed);
        } else {
            self.refresh_fresh.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The Prometheus text: these counters, and the gauges given.
    pub fn render(&self, tenants: usize, skills: usize, digests_computed: u64) -> String {
        let mut out = String::new();
        out.push_str("# HELP skillstore_http_requests_total Requests answered, by route and status.\n");
        out.push_str("# TYPE skillstore_http_requests_total counter\n");
        for ((route, status), n) in self.requests.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let _ = writeln!(
                out,
                "skillstore_http_requests_total{{route=\"{}\",status=\"{status}\"}} {n}",
                escape(route)
            );
        }
        out.push_str("# HELP skillstore_http_request_duration_seconds Time to answer, by route.\n");
        out.push_str("# TYPE skillstore_http_request_duration_seconds histogram\n");
        for (route, h) in self.latency.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            let route = escape(route);
            for (bound, n) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    out,
                    "skillstore_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "skillstore_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "skillstore_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "skillstore_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.count
            );
        }
        out.push_str("# HELP skillstore_refresh_total Catalog refreshes, by outcome.\n");
        out.push_str("# TYPE skillstore_refresh_total counter\n");
        let _ = writeln!(
            out,
            "skillstore_refresh_total{{outcome=\"fresh\"}} {}",
            self.refresh_fresh.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "skillstore_refresh_total{{outcome=\"stale\"}} {}",
            self.refresh_stale.load(Ordering::Relaxed)
        );
        let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
        for (name, kind, help, value) in [
            (
                "skillstore_http_requests_in_flight",
                "gauge",
                "Requests being answered now.",
                load(&self.in_flight),
            ),
            (
                "skillstore_http_connections_open",
                "gauge",
                "Connections open now.",
                load(&self.connections),
            ),
            (
                "skillstore_mcp_sessions_open",
                "gauge",
                "MCP sessions open now.",
                load(&self.mcp_sessions),
            ),
            (
                "skillstore_mcp_sessions_refused_total",
                "counter",
                "MCP sessions refused by a cap.",
                load(&self.mcp_sessions_refused),
            ),
            (
                "skillstore_mcp_sessions_expired_total",
                "counter",
                "MCP sessions closed for being idle.",
                load(&self.mcp_sessions_expired),
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        out.push_str(
            "# HELP skillstore_backend_calls_total Calls made of the storage (a batch counts each path), by kind.\n",
        );
        out.push_str("# TYPE skillstore_backend_calls_total counter\n");
        for call in Call::ALL {
            let _ = writeln!(
                out,
                "skillstore_backend_calls_total{{call=\"{}\"}} {}",
                call.as_str(),
                self.backend_calls.get(call)
            );
        }
        out.push_str("# HELP skillstore_tenants Tenants served.\n# TYPE skillstore_tenants gauge\n");
        let _ = writeln!(out, "skillstore_tenants {tenants}");
        out.push_str("# HELP skillstore_catalog_skills Skills in memory, all tenants.\n");
        out.push_str("# TYPE skillstore_catalog_skills gauge\n");
        let _ = writeln!(out, "skillstore_catalog_skills {skills}");
        out.push_str("# HELP skillstore_digests_computed_total Files hashed for digests.\n");
        out.push_str("# TYPE skillstore_digests_computed_total counter\n");
        let _ = writeln!(out, "skillstore_digests_computed_total {digests_computed}");
        out
    }
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
