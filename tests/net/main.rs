//! The hub's networking: sockets, readiness, faults and where `serve`
//! places connections (by turn, passing over a busy worker). Loopback
//! only; every wait bounded by a watchdog.

#[path = "../common/mod.rs"]
mod common;

mod accept_spread;
mod deal_by_load;
mod descriptors;
mod faults;
mod io_drivers;
mod name_resolution;
mod readiness;
mod ring_cancellation;
mod serve_placement;
mod sockets;
mod split_streams;
mod unix_sockets;
