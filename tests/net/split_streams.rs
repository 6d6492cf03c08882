//! `TcpStream::try_clone` and `into_split`: a reader and a writer green
//! thread on one connection, end of file from a dropped write half,
//! reuniting the halves.

use crate::common;

use std::io::{Read, Write};
use std::net::Shutdown;

use common::hub::{bounded, rt};
use greenlet::hub::net::{OwnedReadHalf, OwnedWriteHalf, TcpListener, TcpStream};
use greenlet::hub::{self, Wait};

fn assert_send<T: Send + 'static>(_: &T) {}

/// 1 MiB through an echo whose halves run on two green threads (on two
/// workers): every byte comes back, and the read half sees end of file
/// when the client shuts its write side.
#[test]
fn split_halves_echo_from_two_green_threads() {
    const TOTAL: usize = 1 << 20;
    let (sent, echoed) = bounded(60, || {
        rt(2)
            .block_on(|| {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (s, _) = l.accept().unwrap();
                let (mut r, mut w) = s.into_split();
                assert_send(&r);
                assert_send(&w);
                let (tx, rx) = hub::channel::<Vec<u8>>(4);
                let reader = hub::spawn(move || {
                    let mut n = 0;
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        let k = r.read(&mut buf).unwrap();
                        if k == 0 {
                            break n;
                        }
                        n += k;
                        tx.send(buf[..k].to_vec()).unwrap();
                    }
                });
                let writer = hub::spawn(move || {
                    for chunk in rx.iter() {
                        w.write_all(&chunk).unwrap();
                    }
                });
                let (cr, mut cw) = c.into_split();
                let sender = hub::spawn(move || {
                    let data: Vec<u8> = (0..TOTAL).map(|i| (i % 251) as u8).collect();
                    cw.write_all(&data).unwrap();
                    // Dropping the write half shuts the client's write side.
                });
                let mut cr: OwnedReadHalf = cr;
                let mut back = Vec::new();
                cr.read_to_end(&mut back).unwrap();
                sender.join().unwrap();
                let n = reader.join().unwrap();
                writer.join().unwrap();
                assert!(back.iter().enumerate().all(|(i, &b)| b == (i % 251) as u8));
                (n, back.len())
            })
            .unwrap()
    });
    assert_eq!(sent, TOTAL);
    assert_eq!(echoed, TOTAL);
}

/// Dropping the write half is a shutdown of the write direction: the peer
/// reads end of file, and the read half still reads what the peer sends
/// after.
#[test]
fn dropping_the_write_half_shuts_writing_only() {
    let got = bounded(30, || {
        rt(1)
            .block_on(|| {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (s, _) = l.accept().unwrap();
                let (mut r, w): (OwnedReadHalf, OwnedWriteHalf) = c.into_split();
                drop(w);
                let mut buf = [0u8; 8];
                assert_eq!((&s).read(&mut buf).unwrap(), 0, "the peer sees end of file");
                (&s).write_all(b"after").unwrap();
                s.shutdown(Shutdown::Write).unwrap();
                let mut got = String::new();
                r.read_to_string(&mut got).unwrap();
                got
            })
            .unwrap()
    });
    assert_eq!(got, "after");
}

/// Halves of one stream reunite into a stream that works (no shutdown was
/// done); halves of two streams are refused and given back.
#[test]
fn reunite_checks_the_halves() {
    bounded(30, || {
        rt(1)
            .block_on(|| {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (sa, _) = l.accept().unwrap();
                let b = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (ar, aw) = a.into_split();
                let (br, bw) = b.into_split();
                let err = ar.reunite(bw).unwrap_err();
                assert!(err.to_string().contains("different TcpStreams"), "{err}");
                let (ar, bw) = (err.0, err.1);
                let mut a = ar.reunite(aw).unwrap();
                drop((br, bw));
                a.write_all(b"whole").unwrap();
                a.shutdown(Shutdown::Write).unwrap();
                let mut got = String::new();
                (&sa).read_to_string(&mut got).unwrap();
                assert_eq!(got, "whole");
            })
            .unwrap()
    });
}

/// A clone waits on its own: one green thread parks reading the clone
/// while another writes through the original, on another worker.
#[test]
fn try_clone_reads_while_the_original_writes() {
    let got = bounded(30, || {
        rt(2)
            .block_on(|| {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (s, _) = l.accept().unwrap();
                let c2 = c.try_clone().unwrap();
                assert_eq!(c2.peer_addr().unwrap(), c.peer_addr().unwrap());
                let reader = hub::spawn(move || {
                    let mut buf = [0u8; 4];
                    (&c2).read_exact(&mut buf).unwrap();
                    buf
                });
                common::hub::until_parked(&reader, Wait::Io);
                let echo = hub::spawn(move || {
                    let mut buf = [0u8; 4];
                    (&s).read_exact(&mut buf).unwrap();
                    (&s).write_all(&buf).unwrap();
                });
                (&c).write_all(b"ping").unwrap();
                echo.join().unwrap();
                reader.join().unwrap()
            })
            .unwrap()
    });
    assert_eq!(&got, b"ping");
}

/// A reader green thread on a split read half waits in one `select` for
/// data or a stop event: data wins while the stop is clear, the stop wins
/// on an idle connection, and the write half's readiness is an arm too.
#[test]
fn a_read_half_selects_between_data_and_a_stop_event() {
    use greenlet::hub::{Event, Selectable};
    use std::sync::Arc;
    bounded(30, || {
        rt(2)
            .block_on(|| {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (mut r, w) = l.accept().unwrap().0.into_split();
                let stop = Arc::new(Event::new());
                let stopper = Arc::clone(&stop);
                let reader = hub::spawn(move || {
                    let mut got = Vec::new();
                    loop {
                        let arms: [&dyn Selectable; 2] = [&r.select_readable(), &*stop];
                        match hub::select(&arms, None).unwrap() {
                            0 => {
                                let mut buf = [0u8; 64];
                                let n = r.read(&mut buf).unwrap();
                                got.extend_from_slice(&buf[..n]);
                            }
                            _ => return got,
                        }
                    }
                });
                (&c).write_all(b"one ").unwrap();
                hub::sleep(std::time::Duration::from_millis(20));
                (&c).write_all(b"two").unwrap();
                hub::sleep(std::time::Duration::from_millis(20));
                assert!(!reader.is_finished(), "the reader left before the stop");
                stopper.set();
                assert_eq!(reader.join().unwrap(), b"one two");
                let now = Some(std::time::Instant::now());
                assert_eq!(
                    hub::select(&[&w.select_writable() as &dyn Selectable], now),
                    Ok(0)
                );
            })
            .unwrap();
    });
}

/// `readable` on a read half parks until data is queued, holding no buffer.
#[test]
fn a_read_half_waits_readable_without_reading() {
    bounded(30, || {
        rt(1)
            .block_on(|| {
                let l = TcpListener::bind("127.0.0.1:0").unwrap();
                let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
                let (mut r, _w) = l.accept().unwrap().0.into_split();
                let waiter = hub::spawn(move || {
                    r.readable().unwrap();
                    let mut buf = [0u8; 8];
                    r.read(&mut buf).unwrap()
                });
                common::hub::until_parked(&waiter, Wait::Io);
                (&c).write_all(b"abc").unwrap();
                assert_eq!(waiter.join().unwrap(), 3);
            })
            .unwrap();
    });
}
