//! C-speed UDP for the baselines: `sendmmsg` from headers built once, a
//! sender paced in small steps, and a sink that only counts (`recvmmsg`).

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// Sends a fixed set of packets, cyclically, over a connected socket with
/// `sendmmsg`: the message headers are built once, a call costs the syscall.
pub struct MmsgSender<'a> {
    socket: &'a UdpSocket,
    // The headers point into `iov`, which points into the packets: `iov` is
    // never touched again after the headers are built.
    _iov: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    next: usize,
    /// Calls that failed (ECONNREFUSED after an ICMP error, ENOBUFS...).
    pub errors: u64,
}

impl<'a> MmsgSender<'a> {
    /// `socket` must be connected; `packets` must outlive the sender.
    pub fn new(socket: &'a UdpSocket, packets: &'a [Vec<u8>]) -> MmsgSender<'a> {
        assert!(!packets.is_empty(), "nothing to send");
        let mut iov: Vec<libc::iovec> = packets
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        let hdrs = iov
            .iter_mut()
            .map(|v| {
                // SAFETY: an all-zero msghdr is valid (no name, no control).
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = v as *mut libc::iovec;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        MmsgSender {
            socket,
            _iov: iov,
            hdrs,
            next: 0,
            errors: 0,
        }
    }

    /// Sends the next `k` packets (wrapping around); returns how many went.
    pub fn send(&mut self, k: usize) -> usize {
        let fd = self.socket.as_raw_fd();
        let mut done = 0;
        while done < k {
            let start = self.next;
            let n = (k - done).min(self.hdrs.len() - start).min(1024);
            // SAFETY: `n` headers from `start` lie within `hdrs`; each points
            // to one live iovec over a live packet.
            let r = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr().add(start), n as u32, 0) };
            if r <= 0 {
                self.errors += 1;
                break;
            }
            done += r as usize;
            self.next = (start + r as usize) % self.hdrs.len();
        }
        done
    }
}

/// Lets this thread's short sleeps end on time (the default timer slack
/// is 50 us, half a pacing step).
pub fn fine_timer_slack() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) only changes this thread's slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
}

/// Sends at `rate` packets/s for `duration` or until `count` packets
/// went, in steps of 100 us: each step the packets due by then, by
/// `sendmmsg`. Returns (packets sent, elapsed).
pub fn paced(
    sender: &mut MmsgSender<'_>,
    rate: f64,
    duration: Duration,
    count: u64,
) -> (u64, Duration) {
    let step = Duration::from_micros(100);
    fine_timer_slack();
    let t0 = Instant::now();
    let mut sent = 0u64;
    loop {
        let el = t0.elapsed();
        if el >= duration || sent >= count {
            return (sent, el);
        }
        let due = ((rate * el.as_secs_f64()) as u64).min(count);
        if due > sent {
            // A late wakeup sends what is due at once, but never more than a
            // few steps' worth in one go.
            let cap = ((rate * step.as_secs_f64() * 4.0) as usize).max(4);
            sent += sender.send(((due - sent) as usize).min(cap)) as u64;
        }
        thread::sleep(step);
    }
}

/// A sink that only counts: `recvmmsg` into fixed buffers, nothing parsed.
/// It naps 50 us when its queue is empty (a sink asleep in recv would be
/// woken per packet, and the sender would pay for the wakeups).
pub struct CountSink {
    pub socket: UdpSocket,
    pub packets: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

const BATCH: usize = 64;

impl CountSink {
    pub fn start() -> CountSink {
        let socket = crate::big_buffers(UdpSocket::bind("127.0.0.1:0").expect("sink"));
        let packets = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (socket, packets, stop) = (
                socket.try_clone().expect("clone"),
                packets.clone(),
                stop.clone(),
            );
            thread::spawn(move || {
                let fd = socket.as_raw_fd();
                let mut bufs = vec![[0u8; 2048]; BATCH];
                let mut iov: Vec<libc::iovec> = bufs
                    .iter_mut()
                    .map(|b| libc::iovec {
                        iov_base: b.as_mut_ptr() as *mut libc::c_void,
                        iov_len: b.len(),
                    })
                    .collect();
                let mut hdrs: Vec<libc::mmsghdr> = iov
                    .iter_mut()
                    .map(|v| {
                        // SAFETY: an all-zero msghdr is valid.
                        let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                        h.msg_hdr.msg_iov = v as *mut libc::iovec;
                        h.msg_hdr.msg_iovlen = 1;
                        h
                    })
                    .collect();
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: BATCH headers, each over one live buffer.
                    let r = unsafe {
                        libc::recvmmsg(
                            fd,
                            hdrs.as_mut_ptr(),
                            BATCH as u32,
                            libc::MSG_DONTWAIT,
                            std::ptr::null_mut(),
                        )
                    };
                    if r > 0 {
                        packets.fetch_add(r as u64, Ordering::Relaxed);
                    } else {
                        thread::sleep(Duration::from_micros(50));
                    }
                }
            })
        };
        CountSink {
            socket,
            packets,
            stop,
            thread: Some(thread),
        }
    }

    pub fn port(&self) -> u16 {
        self.socket.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    pub fn count(&self) -> u64 {
        self.packets.load(Ordering::Relaxed)
    }

    /// Waits until no packet has arrived for `quiet`.
    pub fn settle(&self, quiet: Duration) {
        let mut last = self.count();
        loop {
            thread::sleep(quiet);
            let now = self.count();
            if now == last {
                return;
            }
            last = now;
        }
    }
}

impl Drop for CountSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
