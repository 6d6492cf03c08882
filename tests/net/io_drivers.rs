//! The I/O driver a runtime uses: the builder's choice, the environment
//! variable that overrides it (in child processes, so this binary's own
//! environment stays as the run set it), and a refused value.

use std::io::{Read, Write};

use greenlet::hub::{self, HubError, IoDriver, Runtime, IO_DRIVER_ENV};

use crate::common;

/// What a runtime asked for `asked` gives, or the build's error.
fn built(asked: IoDriver) -> Result<IoDriver, HubError> {
    let rt = Runtime::builder()
        .worker_threads(1)
        .watchdog(None)
        .io_driver(asked)
        .build()?;
    let got = rt.handle().io_driver();
    // A TCP echo through the driver: the runtime really works with it.
    let echoed = rt
        .block_on(|| {
            let l = hub::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let server = hub::spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 5];
                s.read_exact(&mut buf).unwrap();
                s.write_all(&buf).unwrap();
            });
            let mut c = hub::net::TcpStream::connect(addr).unwrap();
            c.write_all(b"hello").unwrap();
            let mut back = [0u8; 5];
            c.read_exact(&mut back).unwrap();
            server.join().unwrap();
            back
        })
        .unwrap();
    assert_eq!(&echoed, b"hello");
    Ok(got)
}

#[test]
fn the_builder_choice_is_the_driver_used() {
    let forced = std::env::var(IO_DRIVER_ENV).ok();
    for asked in [IoDriver::Epoll, IoDriver::IoUring, IoDriver::Auto] {
        match (forced.as_deref(), built(asked)) {
            (Some("epoll"), r) => assert_eq!(r.unwrap(), IoDriver::Epoll),
            (Some("io_uring"), r) => assert_eq!(r.unwrap(), IoDriver::IoUring),
            (Some("auto"), r) => assert_ne!(r.unwrap(), IoDriver::Auto),
            (_, Ok(got)) if asked != IoDriver::Auto => assert_eq!(got, asked),
            (_, Ok(got)) => assert_ne!(got, IoDriver::Auto),
            // A kernel without io_uring: asked for, it is refused, saying so.
            (_, Err(e)) => {
                assert_eq!(asked, IoDriver::IoUring, "{e}");
                assert!(e.to_string().contains("io_uring"), "{e}");
            }
        }
    }
}

/// Run in a child with the variable set: prints the driver used, or the
/// build's error.
#[test]
#[ignore = "run by the tests below in a child process"]
fn child_reports_its_driver() {
    match built(IoDriver::Epoll) {
        Ok(d) => println!("DRIVER={}", d.name()),
        Err(e) => println!("ERROR={e}"),
    }
}

fn child(value: &str) -> String {
    let out = common::run_child_test(
        module_path!(),
        "child_reports_its_driver",
        IO_DRIVER_ENV,
        value,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "child failed: {stdout}");
    stdout
}

#[test]
fn the_variable_forces_each_driver_over_the_builder() {
    assert!(child("epoll").contains("DRIVER=epoll"));
    let uring = child("io_uring");
    assert!(
        uring.contains("DRIVER=io_uring") || uring.contains("does not pass the probe"),
        "{uring}"
    );
}

#[test]
fn a_bad_value_of_the_variable_is_a_config_error() {
    let out = child("kqueue");
    assert!(
        out.contains("ERROR=") && out.contains(IO_DRIVER_ENV) && out.contains("kqueue"),
        "{out}"
    );
}
