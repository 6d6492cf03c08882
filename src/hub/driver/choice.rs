//! Which driver a runtime uses: [`IoDriver`], the environment variable
//! that overrides the builder's choice, and the start-up probe of
//! io_uring.
//!
//! Owns: the parsing of [`IO_DRIVER_ENV`], the probe (made once per
//! process) and the resolution of [`IoDriver::Auto`]. Uses the ring's
//! probe (`Ring::probe`), the stack pool's valgrind check and the hub's
//! error type.

use std::sync::OnceLock;

use super::super::error::HubError;

/// The environment variable that forces a runtime's I/O driver, over
/// [`Builder::io_driver`](crate::hub::Builder::io_driver): `epoll`,
/// `io_uring` or `auto`. Any other value makes
/// [`Builder::build`](crate::hub::Builder::build) fail with
/// [`HubError::InvalidConfig`].
pub const IO_DRIVER_ENV: &str = "GREENLET_IO_DRIVER";

/// The kernel interface a runtime's workers wait on for I/O (see
/// [`Builder::io_driver`](crate::hub::Builder::io_driver)).
///
/// ```
/// use greenlet::hub::{IoDriver, Runtime};
/// assert_eq!(IoDriver::default(), IoDriver::Auto);
/// // A runtime says what `Auto` became here: io_uring or epoll.
/// let rt = Runtime::builder().worker_threads(1).build().unwrap();
/// assert_ne!(rt.handle().io_driver(), IoDriver::Auto);
/// let rt = Runtime::builder().worker_threads(1).io_driver(IoDriver::Epoll).build();
/// # if std::env::var_os(greenlet::hub::IO_DRIVER_ENV).is_none() {
/// assert_eq!(rt.unwrap().handle().io_driver(), IoDriver::Epoll);
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IoDriver {
    /// The default: io_uring where the start-up probe passes (Linux 5.17
    /// and later with the opcodes the driver submits), else epoll; epoll
    /// under valgrind, which stops every thread while one waits in a ring.
    #[default]
    Auto,
    /// epoll, through `mio`: readiness, then a system call per transfer.
    Epoll,
    /// One io_uring ring per worker (Linux): readiness through multishot
    /// polls, TCP transfers of green threads as ring operations. Refused
    /// where the probe fails, and under valgrind.
    IoUring,
}

impl IoDriver {
    /// Its name as [`IO_DRIVER_ENV`] spells it.
    ///
    /// ```
    /// assert_eq!(greenlet::hub::IoDriver::IoUring.name(), "io_uring");
    /// ```
    pub fn name(self) -> &'static str {
        match self {
            IoDriver::Auto => "auto",
            IoDriver::Epoll => "epoll",
            IoDriver::IoUring => "io_uring",
        }
    }
}

/// The driver a runtime built with `asked` uses: the environment
/// variable's if set, else `asked`; `Auto` becomes io_uring if the probe
/// passes, else epoll.
///
/// # Errors
/// [`HubError::InvalidConfig`] for an unknown value of the variable, or
/// io_uring asked for where the probe fails or under valgrind (saying
/// why).
pub(crate) fn resolve(asked: IoDriver) -> Result<IoDriver, HubError> {
    let (asked, source) = match std::env::var(IO_DRIVER_ENV) {
        Ok(v) => (parse(&v)?, "the environment variable"),
        Err(std::env::VarError::NotPresent) => (asked, "Builder::io_driver"),
        Err(std::env::VarError::NotUnicode(v)) => {
            return Err(HubError::InvalidConfig(format!(
                "{IO_DRIVER_ENV}={v:?} is not valid UTF-8: set it to epoll, io_uring or auto"
            )))
        }
    };
    // Valgrind (3.19) keeps its lock over `io_uring_enter`: a worker
    // waiting in its ring stops every other thread of the process, the one
    // that would wake it included, so under valgrind `Auto` is epoll and
    // io_uring is refused.
    let valgrind = crate::coroutine::running_on_valgrind();
    match asked {
        IoDriver::Epoll => Ok(IoDriver::Epoll),
        IoDriver::Auto if valgrind => Ok(IoDriver::Epoll),
        IoDriver::Auto => Ok(match probe() {
            Ok(()) => IoDriver::IoUring,
            Err(_) => IoDriver::Epoll,
        }),
        IoDriver::IoUring if valgrind => Err(HubError::InvalidConfig(format!(
            "io_uring was asked for ({source}) under valgrind, which stops every thread while \
             a worker waits in its ring; ask for epoll or auto"
        ))),
        IoDriver::IoUring => match probe() {
            Ok(()) => Ok(IoDriver::IoUring),
            Err(why) => Err(HubError::InvalidConfig(format!(
                "io_uring was asked for ({source}) but this kernel does not pass the probe \
                 ({why}); ask for epoll or auto"
            ))),
        },
    }
}

fn parse(v: &str) -> Result<IoDriver, HubError> {
    match v.trim() {
        "epoll" => Ok(IoDriver::Epoll),
        "io_uring" | "io-uring" | "uring" => Ok(IoDriver::IoUring),
        "auto" | "" => Ok(IoDriver::Auto),
        other => Err(HubError::InvalidConfig(format!(
            "{IO_DRIVER_ENV}={other:?} is not a driver: set it to epoll, io_uring or auto"
        ))),
    }
}

/// Whether io_uring works here with what the driver needs: made once per
/// process (a ring set up, its features and opcodes asked), then cached.
fn probe() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            #[cfg(target_os = "linux")]
            let r = super::Ring::probe();
            #[cfg(not(target_os = "linux"))]
            let r = Err("io_uring is Linux's".to_string());
            if let Err(why) = &r {
                log::debug!("hub: io_uring probe failed ({why}); auto uses epoll");
            }
            r
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_names_and_refuses_others() {
        assert_eq!(parse("epoll").unwrap(), IoDriver::Epoll);
        assert_eq!(parse("io_uring").unwrap(), IoDriver::IoUring);
        assert_eq!(parse("auto").unwrap(), IoDriver::Auto);
        let e = parse("kqueue").unwrap_err().to_string();
        assert!(e.contains(IO_DRIVER_ENV) && e.contains("kqueue"), "{e}");
    }
}
