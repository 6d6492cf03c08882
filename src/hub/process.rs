//! Child processes for green threads: [`Command`] (std's builder, whose
//! `spawn`, `output` and `status` park instead of blocking the worker)
//! and [`Child`] (its pipes are [`Fd`]s whose reads and writes park, its
//! `wait` parks until the child exits).
//!
//! Owns the two types and [`ProcessError`]. Uses [`Fd`] (the pipes, and
//! the child's pidfd), `spawn`'s task builder (a green thread reads
//! stderr while the caller reads stdout), the hub's `sleep` (the
//! fallback wait) and `libc` (`pidfd_open`).
//!
//! # Waiting for the exit
//! Where the kernel has `pidfd_open(2)` (Linux 5.3 and later), `wait`
//! opens a pidfd for the child, which becomes readable when the child
//! exits, and parks on it like on a socket. Elsewhere it polls
//! `try_wait` with a back-off (1 ms doubling to 64 ms, so a long-lived
//! child costs a wake every 64 ms and an exit is seen within that). On a
//! plain thread it blocks in `waitpid` as std does.

use std::ffi::OsStr;
use std::fmt;
use std::io::{self, Read};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::process::{ExitStatus, Output, Stdio};
use std::time::Duration;

use super::net::Fd;
use super::spawning::task;
use super::time::sleep;
use super::worker;

/// First pause of the fallback wait.
const POLL_MIN: Duration = Duration::from_millis(1);
/// Longest pause of the fallback wait: how late an exit may be seen.
const POLL_MAX: Duration = Duration::from_millis(64);

/// The child's standard input: writes park while the pipe is full.
pub type ChildStdin = Fd<std::process::ChildStdin>;
/// The child's standard output: reads park while the pipe is empty.
pub type ChildStdout = Fd<std::process::ChildStdout>;
/// The child's standard error: reads park while the pipe is empty.
pub type ChildStderr = Fd<std::process::ChildStderr>;

/// Why a child could not be started or waited for; reaches the caller
/// inside an [`io::Error`] of the same kind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessError {
    /// The program could not be started.
    #[error("could not start '{program}': {source}")]
    Spawn {
        /// The program as given.
        program: String,
        /// What the OS said.
        #[source]
        source: io::Error,
    },
    /// A green thread to read the child's standard error could not start.
    #[error("could not start a green thread to read the child's stderr: {0}")]
    Reader(String),
}

impl From<ProcessError> for io::Error {
    fn from(e: ProcessError) -> io::Error {
        let kind = match &e {
            ProcessError::Spawn { source, .. } => source.kind(),
            ProcessError::Reader(_) => io::ErrorKind::Other,
        };
        io::Error::new(kind, e)
    }
}

/// A process builder: `std::process::Command`'s settings, with `spawn`,
/// `output` and `status` that park the calling green thread (a plain
/// thread blocks, as with std).
///
/// ```
/// use greenlet::hub::{self, process::Command};
/// let out = hub::run(|| Command::new("echo").arg("hello").output().unwrap()).unwrap();
/// assert!(out.status.success());
/// assert_eq!(out.stdout, b"hello\n");
/// ```
pub struct Command {
    inner: std::process::Command,
    /// Which of stdin, stdout and stderr the caller set (else `output`
    /// picks: no input, both outputs captured).
    set: [bool; 3],
}

impl Command {
    /// A command running `program` (looked up in `PATH` when it has no
    /// slash), inheriting the environment and the working directory.
    ///
    /// ```
    /// let c = greenlet::hub::process::Command::new("true");
    /// assert_eq!(c.as_std().get_program(), "true");
    /// ```
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command::from(std::process::Command::new(program))
    }

    /// Add an argument.
    ///
    /// ```
    /// let mut c = greenlet::hub::process::Command::new("ls");
    /// c.arg("-l");
    /// assert_eq!(c.as_std().get_args().count(), 1);
    /// ```
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.inner.arg(arg);
        self
    }

    /// Add arguments.
    ///
    /// ```
    /// let mut c = greenlet::hub::process::Command::new("ls");
    /// c.args(["-l", "-a"]);
    /// assert_eq!(c.as_std().get_args().count(), 2);
    /// ```
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.inner.args(args);
        self
    }

    /// Set an environment variable for the child.
    ///
    /// ```
    /// # greenlet::hub::run(|| {
    /// use greenlet::hub::process::Command;
    /// let out = Command::new("sh").args(["-c", "echo $GREETING"]).env("GREETING", "hi").output().unwrap();
    /// assert_eq!(out.stdout, b"hi\n");
    /// # }).unwrap();
    /// ```
    pub fn env(&mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Command {
        self.inner.env(key, value);
        self
    }

    /// Set the child's working directory.
    ///
    /// ```
    /// # greenlet::hub::run(|| {
    /// use greenlet::hub::process::Command;
    /// let out = Command::new("pwd").current_dir("/").output().unwrap();
    /// assert_eq!(out.stdout, b"/\n");
    /// # }).unwrap();
    /// ```
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.inner.current_dir(dir);
        self
    }

    /// The child's standard input (default for `spawn` and `status`:
    /// inherited; for `output`: none).
    ///
    /// ```
    /// use std::process::Stdio;
    /// let mut c = greenlet::hub::process::Command::new("cat");
    /// c.stdin(Stdio::piped());
    /// ```
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.inner.stdin(cfg);
        self.set[0] = true;
        self
    }

    /// The child's standard output (default for `spawn` and `status`:
    /// inherited; for `output`: captured).
    ///
    /// ```
    /// use std::process::Stdio;
    /// let mut c = greenlet::hub::process::Command::new("true");
    /// c.stdout(Stdio::null());
    /// ```
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.inner.stdout(cfg);
        self.set[1] = true;
        self
    }

    /// The child's standard error (default for `spawn` and `status`:
    /// inherited; for `output`: captured).
    ///
    /// ```
    /// use std::process::Stdio;
    /// let mut c = greenlet::hub::process::Command::new("true");
    /// c.stderr(Stdio::null());
    /// ```
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.inner.stderr(cfg);
        self.set[2] = true;
        self
    }

    /// The std builder, to read its settings.
    ///
    /// ```
    /// let c = greenlet::hub::process::Command::new("date");
    /// assert_eq!(c.as_std().get_program(), "date");
    /// ```
    pub fn as_std(&self) -> &std::process::Command {
        &self.inner
    }

    /// The std builder, for settings this type does not forward (the
    /// environment cleared, `std::os::unix::process::CommandExt`, ...).
    ///
    /// ```
    /// let mut c = greenlet::hub::process::Command::new("env");
    /// c.as_std_mut().env_clear();
    /// ```
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.inner
    }

    /// Start the child. Its piped streams come as [`Fd`]s whose reads and
    /// writes park.
    ///
    /// # Errors
    /// [`ProcessError::Spawn`] naming the program (`NotFound`, ...).
    ///
    /// ```
    /// use std::io::Read;
    /// use std::process::Stdio;
    /// use greenlet::hub::{self, process::Command};
    /// hub::run(|| {
    ///     let mut child = Command::new("echo").arg("piped").stdout(Stdio::piped()).spawn().unwrap();
    ///     let mut s = String::new();
    ///     child.stdout.take().unwrap().read_to_string(&mut s).unwrap();
    ///     assert!(child.wait().unwrap().success());
    ///     assert_eq!(s, "piped\n");
    /// })
    /// .unwrap();
    /// ```
    pub fn spawn(&mut self) -> io::Result<Child> {
        let mut child = self.inner.spawn().map_err(|source| ProcessError::Spawn {
            program: self.inner.get_program().to_string_lossy().into_owned(),
            source,
        })?;
        let stdin = child.stdin.take().map(Fd::new).transpose()?;
        let stdout = child.stdout.take().map(Fd::new).transpose()?;
        let stderr = child.stderr.take().map(Fd::new).transpose()?;
        Ok(Child {
            child,
            stdin,
            stdout,
            stderr,
        })
    }

    /// Run the child to its end, capturing its standard output and error
    /// (unless set otherwise) with no input, parking meanwhile.
    ///
    /// # Errors
    /// [`ProcessError::Spawn`] naming the program; a read's or the wait's
    /// error.
    ///
    /// ```
    /// use greenlet::hub::{self, process::Command};
    /// let out = hub::run(|| Command::new("sh").args(["-c", "echo oops >&2; exit 3"]).output().unwrap()).unwrap();
    /// assert_eq!(out.status.code(), Some(3));
    /// assert_eq!(out.stderr, b"oops\n");
    /// ```
    pub fn output(&mut self) -> io::Result<Output> {
        if !self.set[0] {
            self.inner.stdin(Stdio::null());
        }
        if !self.set[1] {
            self.inner.stdout(Stdio::piped());
        }
        if !self.set[2] {
            self.inner.stderr(Stdio::piped());
        }
        let child = self.spawn();
        // The defaults were for this call only.
        for (i, set) in self.set.iter().enumerate() {
            if !set {
                match i {
                    0 => self.inner.stdin(Stdio::inherit()),
                    1 => self.inner.stdout(Stdio::inherit()),
                    _ => self.inner.stderr(Stdio::inherit()),
                };
            }
        }
        child?.wait_with_output()
    }

    /// Run the child to its end, parking meanwhile, and return how it
    /// ended.
    ///
    /// # Errors
    /// [`ProcessError::Spawn`] naming the program; the wait's error.
    ///
    /// ```
    /// use greenlet::hub::{self, process::Command};
    /// let st = hub::run(|| Command::new("false").status().unwrap()).unwrap();
    /// assert_eq!(st.code(), Some(1));
    /// ```
    pub fn status(&mut self) -> io::Result<ExitStatus> {
        self.spawn()?.wait()
    }
}

impl From<std::process::Command> for Command {
    fn from(inner: std::process::Command) -> Command {
        Command {
            inner,
            set: [false; 3],
        }
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

/// A running (or finished) child process. Dropping it neither kills nor
/// waits for the child, as with std.
pub struct Child {
    child: std::process::Child,
    /// Its standard input, when piped.
    pub stdin: Option<ChildStdin>,
    /// Its standard output, when piped.
    pub stdout: Option<ChildStdout>,
    /// Its standard error, when piped.
    pub stderr: Option<ChildStderr>,
}

impl Child {
    /// Its process id.
    ///
    /// ```
    /// # greenlet::hub::run(|| {
    /// let mut c = greenlet::hub::process::Command::new("true").spawn().unwrap();
    /// assert!(c.id() > 0);
    /// c.wait().unwrap();
    /// # }).unwrap();
    /// ```
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Send it `SIGKILL` (nothing, if it has already been waited for).
    ///
    /// # Errors
    /// As `std::process::Child::kill`.
    ///
    /// ```
    /// use std::os::unix::process::ExitStatusExt;
    /// # greenlet::hub::run(|| {
    /// let mut c = greenlet::hub::process::Command::new("sleep").arg("30").spawn().unwrap();
    /// c.kill().unwrap();
    /// assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL));
    /// # }).unwrap();
    /// ```
    pub fn kill(&mut self) -> io::Result<()> {
        self.child.kill()
    }

    /// How it ended, if it has (without waiting).
    ///
    /// # Errors
    /// As `std::process::Child::try_wait`.
    ///
    /// ```
    /// # greenlet::hub::run(|| {
    /// let mut c = greenlet::hub::process::Command::new("sleep").arg("30").spawn().unwrap();
    /// assert!(c.try_wait().unwrap().is_none());
    /// c.kill().unwrap();
    /// c.wait().unwrap();
    /// # }).unwrap();
    /// ```
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Park until it exits and return how it ended (its stdin, if piped,
    /// is closed first, as std does, so a child reading it sees the end).
    /// A parking point: a cancelled wait leaves the child running.
    ///
    /// # Errors
    /// The OS's error from `pidfd_open` (other than "not supported") or
    /// `waitpid`.
    ///
    /// ```
    /// # greenlet::hub::run(|| {
    /// let mut c = greenlet::hub::process::Command::new("true").spawn().unwrap();
    /// assert!(c.wait().unwrap().success());
    /// # }).unwrap();
    /// ```
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        if let Some(st) = self.child.try_wait()? {
            return Ok(st);
        }
        if worker::with_current_task(|_, _| ()).is_none() {
            return self.child.wait();
        }
        match pidfd_open(self.child.id())? {
            Some(pidfd) => {
                let child = &mut self.child;
                pidfd.read_with(|_| match child.try_wait()? {
                    Some(st) => Ok(st),
                    None => Err(io::ErrorKind::WouldBlock.into()),
                })
            }
            None => wait_by_polling(&mut self.child),
        }
    }

    /// Park until it exits, reading all of its piped standard output and
    /// error meanwhile (a green thread of the same worker reads stderr).
    ///
    /// # Errors
    /// A read's or the wait's error; [`ProcessError::Reader`] if the
    /// stderr reader cannot start.
    ///
    /// ```
    /// use std::process::Stdio;
    /// # greenlet::hub::run(|| {
    /// let c = greenlet::hub::process::Command::new("echo")
    ///     .arg("x")
    ///     .stdout(Stdio::piped())
    ///     .spawn()
    ///     .unwrap();
    /// assert_eq!(c.wait_with_output().unwrap().stdout, b"x\n");
    /// # }).unwrap();
    /// ```
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let stdout = self.stdout.take();
        let stderr = self.stderr.take();
        let (stdout, stderr) = if worker::with_current_task(|_, _| ()).is_some() {
            let err_reader = match stderr {
                Some(e) => Some(
                    task()
                        .name("child-stderr")
                        .spawn_local(move || read_all(Some(e)))
                        .map_err(|e| ProcessError::Reader(e.to_string()))?,
                ),
                None => None,
            };
            let out = read_all(stdout)?;
            let err = match err_reader {
                Some(h) => h
                    .join()
                    .map_err(|e| io::Error::from(ProcessError::Reader(e.to_string())))??,
                None => Vec::new(),
            };
            (out, err)
        } else {
            std::thread::scope(|s| {
                let err = s.spawn(move || read_all(stderr));
                let out = read_all(stdout)?;
                let err = err
                    .join()
                    .map_err(|_| io::Error::other("the stderr reader thread panicked"))??;
                Ok::<_, io::Error>((out, err))
            })?
        };
        let status = self.wait()?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

/// Everything left in `pipe` (nothing, if there is no pipe).
fn read_all<T: std::os::fd::AsRawFd>(pipe: Option<Fd<T>>) -> io::Result<Vec<u8>> {
    let mut v = Vec::new();
    if let Some(mut p) = pipe {
        p.read_to_end(&mut v)?;
    }
    Ok(v)
}

/// A pidfd for `pid`, or `None` where the kernel has no `pidfd_open`.
fn pidfd_open(pid: u32) -> io::Result<Option<Fd<OwnedFd>>> {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return Ok(None);
    };
    let none: libc::c_long = 0;
    // SAFETY: pidfd_open takes a pid and flags and reads no memory of
    // ours; the pid is our unreaped child's, so it names that process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::c_long::from(pid), none) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::ENOSYS | libc::EPERM) => Ok(None),
            _ => Err(e),
        };
    }
    let Ok(fd) = i32::try_from(fd) else {
        return Ok(None);
    };
    // SAFETY: a fresh descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Fd::new(owned).map(Some)
}

/// Wait for `child` by polling `try_wait` with a back-off (no pidfd).
fn wait_by_polling(child: &mut std::process::Child) -> io::Result<ExitStatus> {
    let mut delay = POLL_MIN;
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        sleep(delay);
        delay = (delay * 2).min(POLL_MAX);
    }
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child").field("id", &self.id()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fallback wait (kernels without pidfd_open) sees the exit.
    #[test]
    fn polling_wait_sees_the_exit() {
        let st = crate::hub::run(|| {
            let mut c = std::process::Command::new("sh")
                .args(["-c", "sleep 0.05; exit 4"])
                .spawn()
                .unwrap();
            wait_by_polling(&mut c).unwrap()
        })
        .unwrap();
        assert_eq!(st.code(), Some(4));
    }
}
