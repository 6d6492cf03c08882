//! The hub's networking: sockets, readiness, faults and where `serve`
//! places connections. Loopback only; every wait bounded by a watchdog.

#[path = "../common/mod.rs"]
mod common;

mod faults;
mod readiness;
mod serve_placement;
mod sockets;
